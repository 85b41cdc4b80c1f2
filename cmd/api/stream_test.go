package api_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sse is one server-sent event.
type sse struct{ event, id, data string }

// readEvents reads an event stream to its end.
func (e *env) readEvents(t *testing.T, id, lastEventID string) []sse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", e.http.URL+"/v1/requests/"+id+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+readToken)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var out []sse
	var cur sse
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur != (sse{}) {
				out = append(out, cur)
			}
			cur = sse{}
		case strings.HasPrefix(line, "event: "):
			cur.event = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			cur.id = line[len("id: "):]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[len("data: "):]
		}
	}
	require.NoError(t, sc.Err())
	return out
}

func kinds(evs []sse) []string {
	var out []string
	for _, ev := range evs {
		if ev.event == "terminal" {
			out = append(out, "terminal")
			continue
		}
		i := strings.Index(ev.data, `"kind":"`)
		out = append(out, strings.SplitN(ev.data[i+8:], `"`, 2)[0])
	}
	return out
}

// TestEventsResumeWithoutLossOrRepeat: a flaky request's whole stream
// (queued, three attempts started, two failed, terminal), then every resume
// point gives exactly the rest.
func TestEventsResumeWithoutLossOrRepeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	st := e.submit(map[string]any{"persona": "flaky", "task_id": "t-sse"})
	id := st["request_id"].(string)
	live := e.readEvents(t, id, "") // follows it live, from queued
	got := kinds(live)
	require.Equal(t, "terminal", got[len(got)-1], "the terminal event ends the stream")
	// queued is published once the request is stored, so a fast first
	// attempt may start before it.
	require.ElementsMatch(t, []string{"queued", "started", "failed", "started", "failed", "started"}, got[:len(got)-1])
	last := live[len(live)-1]
	require.Equal(t, "terminal", last.id)
	require.Contains(t, last.data, `"status":"succeeded"`)
	require.Contains(t, last.data, `"record":{`)
	for i := 0; i < len(live)-1; i++ {
		again := e.readEvents(t, id, live[i].id)
		require.Equal(t, live[i+1:], again, "resumed after event %d (id %s)", i, live[i].id)
	}
	require.Equal(t, live[len(live)-1:], e.readEvents(t, id, "terminal"))
	r := e.do("GET", "/v1/requests/"+id+"/events", readToken, nil, "Last-Event-ID", "banana")
	require.Equal(t, http.StatusBadRequest, r.code)
}

// TestEventsKeepAlive: a request that runs a while gets comment lines.
func TestEventsKeepAlive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	st := e.submit(map[string]any{"persona": "slowpoke", "task_id": "t-ka", "policy_overrides": stillRunning})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.http.URL+"/v1/requests/"+st["request_id"].(string)+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == ": keep-alive" {
			return
		}
	}
	t.Fatal("no keep-alive comment")
}
