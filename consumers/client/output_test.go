package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// chunks collects what OnOutput passes on; seen is signalled with each
// chunk's text.
type chunks struct {
	mu   sync.Mutex
	all  []schemas.OutputChunk
	seen chan string
}

func newChunks() *chunks { return &chunks{seen: make(chan string, 1024)} }

func (c *chunks) take(ch *schemas.OutputChunk) {
	c.mu.Lock()
	c.all = append(c.all, *ch)
	c.mu.Unlock()
	c.seen <- ch.Data
}

func (c *chunks) list() []schemas.OutputChunk {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]schemas.OutputChunk(nil), c.all...)
}

// waitFor blocks until the text passed on so far contains want.
func (c *chunks) waitFor(t *testing.T, want string) {
	t.Helper()
	var got strings.Builder
	timeout := time.After(30 * time.Second)
	for !strings.Contains(got.String(), want) {
		select {
		case s := <-c.seen:
			got.WriteString(s)
		case <-timeout:
			t.Fatalf("live output %q never reached the caller (got %q)", want, got.String())
		}
	}
}

// texts checks the chunks are whole and in order — per attempt, each
// offset where the text before it ended, the final chunk last, a retry's
// marker before its attempt's text — and returns each attempt's text.
func texts(t *testing.T, cs []schemas.OutputChunk) map[int]string {
	t.Helper()
	out := map[int]string{}
	final := map[int]bool{}
	attempt := 0
	for i, c := range cs {
		if c.Supersedes > 0 {
			require.Greater(t, c.Attempt, attempt, "chunk %d: a marker opens a later attempt", i)
			require.Equal(t, c.Attempt-1, c.Supersedes, "chunk %d", i)
			attempt = c.Attempt
			continue
		}
		require.GreaterOrEqual(t, c.Attempt, attempt, "chunk %d: attempts in order", i)
		attempt = c.Attempt
		require.False(t, final[c.Attempt], "chunk %d after attempt %d's final chunk", i, c.Attempt)
		require.Equal(t, int64(len(out[c.Attempt])), c.Offset, "chunk %d: offset", i)
		out[c.Attempt] += c.Data
		final[c.Attempt] = c.Final
	}
	for a := range out {
		require.True(t, final[a], "attempt %d has its final chunk", a)
	}
	return out
}

// TestOnOutputEachPersonaKind: a Go handler, an HTTP persona streaming
// server-sent events or NDJSON, and a command persona each write their
// first piece, and wait until the caller has it — proof it arrives while
// they work — before writing the rest; the caller gets the whole text
// once, in order, and the output as always.
func TestOnOutputEachPersonaKind(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	release := map[string]chan struct{}{}
	for _, k := range []string{"go", "sse", "ndjson", "command"} {
		release[k] = make(chan struct{})
	}
	goPersona := handlers.Func(func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
		w := handlers.OutputWriter(ctx)
		fmt.Fprint(w, "Reading the code. ")
		<-release["go"]
		fmt.Fprint(w, "The change is sound.")
		return handlers.Result{Output: []byte(`{"review":"sound"}`)}, nil
	})
	sse := streamingServer(t, "text/event-stream", release["sse"],
		`data: {"choices":[{"delta":{"content":"Reading the code. "}}]}`+"\n\n",
		`data: {"choices":[{"delta":{"content":"The change is sound."}}]}`+"\n\ndata: [DONE]\n\n")
	ndjson := streamingServer(t, "application/x-ndjson", release["ndjson"],
		`{"personaq_output":"Reading the code. "}`+"\n", `{"personaq_output":"The change is sound."}`+"\n")
	dir := t.TempDir()
	script := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(script, []byte(`#!/bin/sh
cat >/dev/null
echo '{"personaq_output":"Reading the code. "}'
while [ ! -f "`+dir+`/go" ]; do sleep 0.01; done
echo '{"personaq_output":"The change is sound."}'
echo '{"review":"sound"}'
`), 0o700))
	cmd, err := handlers.NewCommand(handlers.CommandConfig{Path: script})
	require.NoError(t, err)
	personas := map[string]consumers.Handler{"go": goPersona, "sse": httpPersona(t, sse), "ndjson": httpPersona(t, ndjson), "command": cmd}
	wantOutput := map[string]string{"go": `{"review":"sound"}`, "sse": `"Reading the code. The change is sound."`,
		"ndjson": `"Reading the code. The change is sound."`, "command": `{"review":"sound"}`}
	var ps []consumers.Persona
	for name, h := range personas {
		ps = append(ps, consumers.Persona{Name: "live-" + name, Handler: h, Policy: policy(1, 30*time.Second)})
	}
	e.serve(consumers.Config{}, ps...)
	for name := range personas {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := newChunks()
			go func() {
				got.waitFor(t, "Reading the code. ")
				if name == "command" {
					_ = os.WriteFile(filepath.Join(dir, "go"), nil, 0o600)
				}
				close(release[name])
			}()
			res, err := e.c.Run(context.Background(), schemas.NewRequest("story-"+name, "review", "live-"+name), client.OnOutput(got.take))
			require.NoError(t, err)
			require.JSONEq(t, wantOutput[name], string(res.Output))
			require.Equal(t, map[int]string{1: "Reading the code. The change is sound."}, texts(t, got.list()))
		})
	}
}

// streamingServer answers with first, flushed, then waits for release
// before the rest.
func streamingServer(t *testing.T, ctype string, release chan struct{}, first, rest string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", ctype)
		_, _ = io.WriteString(w, first)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, rest)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func httpPersona(t *testing.T, srv *httptest.Server) consumers.Handler {
	t.Helper()
	h, err := handlers.NewHTTP(handlers.HTTPConfig{URL: srv.URL})
	require.NoError(t, err)
	t.Cleanup(h.CloseIdleConnections)
	return h
}

// TestOnOutputRetrySupersedes: attempt 1 writes part of an answer and
// fails; the caller is told attempt 2 voids it, then gets attempt 2's.
func TestOnOutputRetrySupersedes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.serve(consumers.Config{}, consumers.Persona{Name: "retrier", Policy: policy(3, 30*time.Second), Handler: handlers.Func(
		func(ctx context.Context, req *handlers.Request) (handlers.Result, error) {
			w := handlers.OutputWriter(ctx)
			if req.Attempt == 1 {
				fmt.Fprint(w, "The plan has fo")
				return handlers.Result{}, handlers.Retryable(errors.New("model overloaded"))
			}
			fmt.Fprint(w, "The plan has three steps.")
			return handlers.Result{Output: []byte(`"three"`)}, nil
		})})
	got := newChunks()
	_, err := e.c.Run(context.Background(), schemas.NewRequest("story-retry", "plan", "retrier"), client.OnOutput(got.take))
	require.NoError(t, err)
	cs := got.list()
	require.Equal(t, map[int]string{1: "The plan has fo", 2: "The plan has three steps."}, texts(t, cs))
	var markers []int
	for _, c := range cs {
		if c.Supersedes > 0 {
			markers = append(markers, c.Supersedes)
		}
	}
	require.Equal(t, []int{1}, markers, "one marker, voiding attempt 1")
}

// TestOnOutputFromTheStartWhenCalledMidStream: a caller that starts
// following while the persona is half way through gets the text written
// before it came, then the rest, each piece once.
func TestOnOutputFromTheStartWhenCalledMidStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	release := make(chan struct{})
	e.serve(consumers.Config{}, consumers.Persona{Name: "writer", Policy: policy(1, 30*time.Second), Handler: handlers.Func(
		func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
			w := handlers.OutputWriter(ctx)
			for i := range 50 {
				fmt.Fprintf(w, "line %02d\n", i)
			}
			<-release
			for i := 50; i < 100; i++ {
				fmt.Fprintf(w, "line %02d\n", i)
			}
			return handlers.Result{Output: []byte(`"done"`)}, nil
		})})
	// A watcher on the output stream sees the first half stored (a plain
	// subscriber may see a chunk before the stream has stored it, and a
	// caller reads back only what is stored).
	out := wire.Topology{}.WithDefaults().Output
	early, err := e.js.OrderedConsumer(context.Background(), out.Stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{out.Prefix + ".>"}})
	require.NoError(t, err)
	req := schemas.NewRequest("story-mid", "plan", "writer")
	_, err = e.c.Submit(context.Background(), req)
	require.NoError(t, err)
	var seen strings.Builder
	for !strings.Contains(seen.String(), "line 49\n") {
		m, err := early.Next(jetstream.FetchMaxWait(30 * time.Second))
		require.NoError(t, err, "the first half was never stored")
		c, err := schemas.DecodeOutputChunk(m.Data())
		require.NoError(t, err)
		seen.WriteString(c.Data)
	}
	got := newChunks()
	// Released whether or not the first half arrived: a waitFor that fails
	// must end the test, not leave the persona (and Await) blocked.
	go func() { defer close(release); got.waitFor(t, "line 49\n") }()
	_, err = e.c.Await(context.Background(), req.RequestID, client.OnOutput(got.take))
	require.NoError(t, err)
	var want strings.Builder
	for i := range 100 {
		fmt.Fprintf(&want, "line %02d\n", i)
	}
	require.Equal(t, map[int]string{1: want.String()}, texts(t, got.list()))
}

// TestOnOutputCap: past the attempt's cap the rest is dropped and counted
// (one marker, and the count on the final chunk); the persona is not held
// up and its request succeeds with its whole output.
func TestOnOutputCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	const capBytes, written = 1000, 3500
	e.serve(consumers.Config{Topology: wire.Topology{Output: wire.OutputTopology{AttemptMax: capBytes}}},
		consumers.Persona{Name: "chatty", Policy: policy(1, 30*time.Second), Handler: handlers.Func(
			func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
				w := handlers.OutputWriter(ctx)
				for range written / 7 {
					fmt.Fprint(w, "token ") // 6 bytes
					fmt.Fprint(w, "x")
				}
				return handlers.Result{Output: []byte(`"all of it"`)}, nil
			})})
	got := newChunks()
	res, err := e.c.Run(context.Background(), schemas.NewRequest("story-cap", "plan", "chatty"), client.OnOutput(got.take))
	require.NoError(t, err)
	require.JSONEq(t, `"all of it"`, string(res.Output))
	cs := got.list()
	text := texts(t, cs)
	require.Len(t, text[1], capBytes)
	var markers []int64
	for _, c := range cs[:len(cs)-1] {
		if c.Truncated > 0 {
			markers = append(markers, c.Truncated)
		}
	}
	require.Len(t, markers, 1, "one truncated marker")
	require.Equal(t, int64(written-capBytes), cs[len(cs)-1].Truncated, "the final chunk counts every byte dropped")
	require.Less(t, len(cs), 20, "coalesced: %d chunks for %d writes", len(cs), 2*written/7)
}

// TestOnOutputNothingStreamed: a persona that writes nothing, retried,
// gives the caller no chunk at all (the retry's marker voids nothing).
func TestOnOutputNothingStreamed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.serve(consumers.Config{}, consumers.Persona{Name: "quiet", Policy: policy(3, 30*time.Second), Handler: handlers.Func(
		func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
			if req.Attempt == 1 {
				return handlers.Result{}, handlers.Retryable(errors.New("try again"))
			}
			return handlers.Result{Output: []byte(`"ok"`)}, nil
		})})
	got := newChunks()
	res, err := e.c.Run(context.Background(), schemas.NewRequest("story-quiet", "plan", "quiet"), client.OnOutput(got.take))
	require.NoError(t, err)
	require.Equal(t, 2, res.Record.Attempts)
	require.Empty(t, got.list())
}
