package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/api"
	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// streamerPersona writes three pieces of 5,000 bytes (each over the flush
// size, so several chunks) on each attempt; attempt 1 then fails, attempt
// 2 succeeds.
func streamerPersona() consumers.Persona {
	return consumers.Persona{Name: "streamer", Policy: scaled(retry.PersonaPolicy(time.Minute)), Handler: handlers.Func(
		func(ctx context.Context, req *handlers.Request) (handlers.Result, error) {
			w := handlers.OutputWriter(ctx)
			for i := range 3 {
				fmt.Fprint(w, strings.Repeat(fmt.Sprint(req.Attempt*10+i), 2500))
			}
			if req.Attempt == 1 {
				return handlers.Result{}, handlers.Retryable(errors.New("model overloaded"))
			}
			return handlers.Result{Output: []byte(`"done"`)}, nil
		})}
}

// streamed splits an event stream into its attempt events and its output
// events (output and output_superseded), keeping each stream's order.
func streamed(evs []sse) (attempts, output []sse) {
	for _, ev := range evs {
		switch ev.event {
		case "attempt":
			attempts = append(attempts, sse{event: ev.event, data: ev.data})
		case "output", "output_superseded":
			output = append(output, sse{event: ev.event, data: ev.data})
		}
	}
	return attempts, output
}

// attemptTexts checks the output events are whole and in order and
// returns each attempt's text.
func attemptTexts(t *testing.T, output []sse) map[int]string {
	t.Helper()
	texts := map[int]string{}
	for _, ev := range output {
		c, err := schemas.DecodeOutputChunk([]byte(ev.data))
		require.NoError(t, err)
		if ev.event == "output_superseded" {
			require.Equal(t, c.Attempt-1, c.Supersedes)
			continue
		}
		require.Equal(t, int64(len(texts[c.Attempt])), c.Offset)
		texts[c.Attempt] += c.Data
	}
	return texts
}

// TestOutputEventsResumeWithoutLossOrRepeat: a streaming request's whole
// event stream (two attempts of live output, the second voiding the
// first), then every resume point gives exactly the rest of both streams.
func TestOutputEventsResumeWithoutLossOrRepeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t, streamerPersona())
	id := e.submit(map[string]any{"persona": "streamer", "task_id": "t-live"})["request_id"].(string)
	live := e.readEvents(t, id, "")
	require.Equal(t, "terminal", live[len(live)-1].event)
	attempts, output := streamed(live)
	require.Len(t, attempts, 4, "queued, started, failed, started: %v", attempts)
	want := map[int]string{}
	for a := 1; a <= 2; a++ {
		for i := range 3 {
			want[a] += strings.Repeat(fmt.Sprint(a*10+i), 2500)
		}
	}
	require.Equal(t, want, attemptTexts(t, output))
	var superseded []string
	for _, ev := range output {
		if ev.event == "output_superseded" {
			superseded = append(superseded, ev.data)
		}
	}
	require.Len(t, superseded, 1, "attempt 2 voids attempt 1's output, once")
	for i := 0; i < len(live)-1; i++ {
		again := e.readEvents(t, id, live[i].id)
		wantA, wantO := streamed(resumedAfter(live, i))
		gotA, gotO := streamed(again)
		require.Equal(t, wantA, gotA, "attempt events resumed after event %d (id %s)", i, live[i].id)
		require.Equal(t, wantO, gotO, "output resumed after event %d (id %s)", i, live[i].id)
		require.Equal(t, live[len(live)-1], again[len(again)-1], "the terminal event last")
	}
}

// resumedAfter is what a stream resumed after event i holds: the events of
// each stream past the position event i's id names.
func resumedAfter(live []sse, i int) []sse {
	var out []sse
	var seenA, seenO uint64
	for _, ev := range live {
		switch ev.event {
		case "attempt":
			seenA++
			if seenA > countUpTo(live, i, "attempt") {
				out = append(out, ev)
			}
		case "output", "output_superseded":
			seenO++
			if seenO > countUpTo(live, i, "output") {
				out = append(out, ev)
			}
		}
	}
	return out
}

// countUpTo counts the events of one stream (attempt, or output with its
// markers) written up to and including event i.
func countUpTo(live []sse, i int, stream string) uint64 {
	var n uint64
	for _, ev := range live[:i+1] {
		if ev.event == stream || stream == "output" && ev.event == "output_superseded" {
			n++
		}
	}
	return n
}

// TestOutputEventsNeedTheReadScope: live output is read with the read
// scope, like the rest of a request.
func TestOutputEventsNeedTheReadScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t, streamerPersona())
	id := e.submit(map[string]any{"persona": "streamer", "task_id": "t-scope"})["request_id"].(string)
	e.awaitTerminal(id)
	s, err := api.New(api.Config{JetStream: e.js, Logger: &e.log, Tokens: []api.Token{
		{Name: "submitter", Secret: "submit-only-token-for-this-test", Scopes: []api.Scope{api.ScopeSubmit}}}})
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); s.Stop() })
	r := doURL(t, hs.URL, "GET", "/v1/requests/"+id+"/events", "submit-only-token-for-this-test", nil)
	require.Equal(t, http.StatusForbidden, r.code, "%s", r.body)
	var p map[string]any
	require.NoError(t, json.Unmarshal(r.body, &p))
	require.Equal(t, "read", p["scope"])
}

// TestEventIDs: ids are a plain attempts-stream sequence until output is
// written, then both positions; anything else is refused.
func TestEventIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit(map[string]any{"persona": "echo", "task_id": "t-ids"})["request_id"].(string)
	e.awaitTerminal(id)
	for _, tc := range []struct {
		id   string
		code int
	}{{"1", 200}, {"1.0", 200}, {"0.5", 200}, {"terminal", 200}, {"1.", 400}, {".1", 400}, {"1.2.3", 400}, {"-1", 400}, {"a.1", 400}} {
		r := e.do("GET", "/v1/requests/"+id+"/events", readToken, nil, "Last-Event-ID", tc.id)
		require.Equal(t, tc.code, r.code, "Last-Event-ID %q: %s", tc.id, r.body)
	}
}
