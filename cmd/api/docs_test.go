package api_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/personaq/personaq/cmd/config"
)

// block is one fenced code block of a Markdown file.
type block struct {
	lang, text string
	line       int
}

var fence = regexp.MustCompile("(?m)^```([a-z]*)\n")

func blocks(t *testing.T, path string) []block {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	src := string(raw)
	var out []block
	for {
		loc := fence.FindStringSubmatchIndex(src)
		if loc == nil {
			return out
		}
		end := strings.Index(src[loc[1]:], "\n```\n")
		require.GreaterOrEqual(t, end, 0, "unclosed block in %s", path)
		line := strings.Count(string(raw[:len(raw)-len(src)+loc[0]]), "\n") + 1
		out = append(out, block{lang: src[loc[2]:loc[3]], text: src[loc[1] : loc[1]+end+1], line: line})
		src = src[loc[1]+end+4:]
	}
}

// TestAPIDocExamplesRun runs every shell block of docs/api.md, in order,
// against a live server; a text block right after one is its exact output.
// JSON blocks parse; the YAML block is a valid api section.
func TestAPIDocExamplesRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bs := blocks(t, filepath.Join("..", "..", "docs", "api.md"))
	ran := 0
	for i, b := range bs {
		switch b.lang {
		case "sh":
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", b.text)
			cmd.Env = append(os.Environ(), "API="+e.http.URL+"/v1", "PERSONAQ_API_TOKEN="+allToken)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			require.NoError(t, cmd.Run(), "docs/api.md:%d: %s\n%s", b.line, b.text, errb.String())
			if i+1 < len(bs) && bs[i+1].lang == "text" {
				require.Equal(t, bs[i+1].text, out.String(), "docs/api.md:%d: the output shown", b.line)
			}
			if strings.Contains(b.text, "plannr") { // the problem the next block shows
				var got, shown map[string]any
				require.NoError(t, json.Unmarshal(out.Bytes(), &got))
				require.NoError(t, json.Unmarshal([]byte(bs[i+1].text), &shown))
				require.Equal(t, shown, got, "docs/api.md:%d", b.line)
			}
			ran++
		case "json":
			require.True(t, json.Valid([]byte(b.text)), "docs/api.md:%d: JSON", b.line)
		case "yaml":
			var f struct {
				API config.APIConfig `yaml:"api"`
			}
			dec := yaml.NewDecoder(strings.NewReader(b.text))
			dec.KnownFields(true)
			require.NoError(t, dec.Decode(&f), "docs/api.md:%d", b.line)
			require.NotEmpty(t, f.API.Tokens)
		case "text":
		default:
			t.Fatalf("docs/api.md:%d: a %q block no test runs", b.line, b.lang)
		}
	}
	require.GreaterOrEqual(t, ran, 8)
}

// TestWireDocProgramRuns builds and runs the Go program of docs/wire.md
// against a live deployment; the HTTP API then sees its request, and a
// submit of the same content over HTTP is the same request (the digests
// agree).
func TestWireDocProgramRuns(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a program")
	}
	e := newEnv(t)
	var prog []block
	for _, b := range blocks(t, filepath.Join("..", "..", "docs", "wire.md")) {
		if b.lang == "go" {
			prog = append(prog, b)
		} else {
			require.Contains(t, []string{"", "text"}, b.lang, "docs/wire.md:%d: a block no test runs", b.line)
		}
	}
	require.Len(t, prog, 1)
	require.NoError(t, os.MkdirAll("testdata", 0o755)) // inside the module, so the program builds with its go.mod
	dir, err := os.MkdirTemp("testdata", "wiredoc-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog[0].text), 0o600))
	cmd := exec.Command("go", "run", "./"+dir)
	cmd.Env = append(os.Environ(), "NATS_URL="+e.nats.URL())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := regexp.MustCompile(`stored request (\S+) at seq \d+\nsucceeded: (.*)\n`).FindStringSubmatch(string(out))
	require.NotNil(t, m, "%s", out)
	require.Contains(t, m[2], "over the wire")

	id := m[1]
	st := e.do("GET", "/v1/requests/"+id, readToken, nil)
	require.Equal(t, 200, st.code, "%s", st.body)
	require.Equal(t, "succeeded", st.json(t)["status"])
	again := e.do("POST", "/v1/requests", allToken, map[string]any{"request_id": id, "task_id": "story-7", "step": "plan",
		"persona": "echo", "input": map[string]any{"goal": "over the wire"}, "deadline": time.Now().Add(time.Hour)})
	require.Equal(t, 200, again.code, "the same request: %s", again.body)
	other := e.do("POST", "/v1/requests", allToken, map[string]any{"request_id": id, "task_id": "story-7", "step": "plan", "persona": "echo"})
	require.Equal(t, 409, other.code, "%s", other.body)
}
