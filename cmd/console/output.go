package console

import (
	"context"
	"sync"
	"time"

	"net/http"

	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/schemas"
)

// requestOutput is GET /requests/{id}/output: the request's live output
// as server-sent events (output, output_superseded: the chunk; end: the
// request has its terminal record), for the task page's view of a running
// request. It follows the request as the Go client does (client.OnOutput:
// from the first chunk, each once).
func (s *Server) requestOutput(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	sse, ok := newSSE(w)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	c, err := client.New(client.Config{JetStream: s.cfg.JetStream, Topology: s.cfg.Topology})
	if err != nil {
		_ = sse.send("end", 0, map[string]string{"error": err.Error()})
		return
	}
	var mu sync.Mutex // the chunks and the pings come from two goroutines
	send := func(event string, v any) {
		mu.Lock()
		defer mu.Unlock()
		_ = sse.send(event, 0, v)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		t := time.NewTicker(pingEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				mu.Lock()
				_ = sse.ping()
				mu.Unlock()
			case <-ctx.Done():
				return
			}
		}
	}()
	_, _ = c.Await(ctx, id, client.OnOutput(func(ch *schemas.OutputChunk) {
		event := "output"
		if ch.Supersedes > 0 {
			event = "output_superseded"
		}
		send(event, ch)
	}))
	if ctx.Err() == nil {
		send("end", struct{}{})
	}
}
