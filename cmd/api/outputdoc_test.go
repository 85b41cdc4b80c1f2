package api_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// recorder is a live output writer that keeps each write.
type recorder struct {
	mu     sync.Mutex
	writes []string
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

// TestOutputDocExamplesRun runs every block of docs/output.md: the Go
// handler compiles; each streamed HTTP answer, served by a real server,
// streams its two pieces of text and leaves their sum as the output; the
// chunk is valid; the Python agent runs as a command persona of a live
// deployment, and the shell blocks follow its request over the API, each
// printing the text block after it.
func TestOutputDocExamplesRun(t *testing.T) {
	t.Parallel()
	bs := blocks(t, filepath.Join("..", "..", "docs", "output.md"))
	var agent string
	for _, b := range bs {
		if b.lang == "python" {
			agent = b.text
		}
	}
	require.NotEmpty(t, agent, "docs/output.md: the command persona")
	e := newEnv(t, reviewerPersona(t, agent))
	ran := map[string]int{}
	for i, b := range bs {
		where := "docs/output.md:" + strconv.Itoa(b.line)
		switch b.lang {
		case "go":
			if !testing.Short() {
				compileDocGo(t, b.text, where)
			}
		case "sse", "ndjson":
			streamDocAnswer(t, b, where)
		case "json":
			_, err := schemas.DecodeOutputChunk([]byte(b.text))
			require.NoError(t, err, where)
		case "python":
		case "bench":
			if !testing.Short() {
				benchExists(t, b.text, where)
			}
		case "sh":
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", b.text)
			cmd.Env = append(os.Environ(), "API="+e.http.URL+"/v1", "PERSONAQ_API_TOKEN="+allToken)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			require.NoError(t, cmd.Run(), "%s: %s\n%s", where, b.text, errb.String())
			require.Less(t, i+1, len(bs), where)
			require.Equal(t, "text", bs[i+1].lang, "%s: the output shown", where)
			require.Equal(t, bs[i+1].text, out.String(), "%s: the output shown", where)
		case "text":
		default:
			t.Fatalf("%s: a %q block no test runs", where, b.lang)
		}
		ran[b.lang]++
	}
	require.Equal(t, map[string]int{"go": 1, "sse": 2, "ndjson": 1, "python": 1, "json": 1, "sh": 3, "text": 3, "bench": 1}, ran)
}

// reviewerPersona runs the Python agent of docs/output.md as the command
// persona "reviewer".
func reviewerPersona(t *testing.T, script string) consumers.Persona {
	t.Helper()
	path := filepath.Join(t.TempDir(), "reviewer.py")
	require.NoError(t, os.WriteFile(path, []byte(script), 0o700))
	inv, err := handlers.NewCommand(handlers.CommandConfig{Path: path})
	require.NoError(t, err)
	p := retry.PersonaPolicy(20 * time.Second).WithDefaults()
	return consumers.Persona{Name: "reviewer", Handler: inv, Policy: p, Concurrency: 2}
}

// compileDocGo builds the Go block as a package of this module.
func compileDocGo(t *testing.T, src, where string) {
	t.Helper()
	require.NoError(t, os.MkdirAll("testdata", 0o755))
	dir, err := os.MkdirTemp("testdata", "outputdoc-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.WriteFile(filepath.Join(dir, "personas.go"), []byte(src), 0o600))
	out, err := exec.Command("go", "vet", "./"+dir).CombinedOutput()
	require.NoError(t, err, "%s: %s", where, out)
}

// streamDocAnswer serves the block as a persona's streamed answer and
// runs an HTTP persona against it.
func streamDocAnswer(t *testing.T, b block, where string) {
	t.Helper()
	ctype := "text/event-stream"
	if b.lang == "ndjson" {
		ctype = "application/x-ndjson"
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", ctype)
		f := w.(http.Flusher)
		for _, line := range strings.SplitAfter(b.text, "\n") {
			_, _ = w.Write([]byte(line))
			f.Flush()
		}
	}))
	defer srv.Close()
	inv, err := handlers.NewHTTP(handlers.HTTPConfig{URL: srv.URL})
	require.NoError(t, err)
	defer inv.CloseIdleConnections()
	rec := &recorder{}
	req := &handlers.Request{Message: schemas.NewRequest("story-7", "plan", "planner"), Attempt: 1}
	res, err := inv.Handle(handlers.WithOutput(context.Background(), rec), req)
	require.NoError(t, err, where)
	require.Equal(t, []string{"The plan ", "has 3 steps."}, rec.writes, where)
	require.JSONEq(t, `"The plan has 3 steps."`, string(res.Output), where)
	if b.lang == "sse" {
		require.Equal(t, retry.Usage{InputTokens: 812, OutputTokens: 9}, res.Usage, where)
	} else {
		require.Equal(t, retry.Progress{Completed: 1, Total: 2}, res.Progress, where)
	}
}

// benchExists checks the benchmark command names a benchmark of its
// package (go test -list compiles the package's tests to list it).
func benchExists(t *testing.T, cmdline, where string) {
	t.Helper()
	f := strings.Fields(cmdline)
	require.GreaterOrEqual(t, len(f), 4, where)
	require.Equal(t, []string{"go", "test"}, f[:2], where)
	var name, pkg string
	for i, a := range f {
		if a == "-bench" && i+1 < len(f) {
			name = f[i+1]
		}
	}
	pkg = f[len(f)-1]
	require.NotEmpty(t, name, where)
	cmd := exec.Command("go", "test", "-list", "^"+name+"$", pkg)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s: %s", where, out)
	require.Contains(t, string(out), name+"\n", "%s: %s names no benchmark", where, name)
}
