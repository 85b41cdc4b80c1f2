package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// sseWriter writes server-sent events.
type sseWriter struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) (*sseWriter, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, "retry: 2000\n\n")
	f.Flush()
	return &sseWriter{w: w, f: f}, true
}

// send writes one event; id may be 0 (none).
func (s *sseWriter) send(event string, id uint64, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("sse %s: %w", event, err)
	}
	if id > 0 {
		_, _ = fmt.Fprintf(s.w, "id: %d\n", id)
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return fmt.Errorf("sse %s: %w", event, err)
	}
	s.f.Flush()
	return nil
}

// ping keeps proxies from closing an idle stream.
func (s *sseWriter) ping() error {
	if _, err := fmt.Fprint(s.w, ": ping\n\n"); err != nil {
		return fmt.Errorf("sse ping: %w", err)
	}
	s.f.Flush()
	return nil
}

// pingEvery is how often an idle stream gets a comment.
const pingEvery = 15 * time.Second
