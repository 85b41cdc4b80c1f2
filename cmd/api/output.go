package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

// output is GET /v1/requests/{id}/output: the persona's answer, inline or
// streamed from the outputs object store.
func (s *Server) output(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.OpTimeout)
	defer cancel()
	rec, err := s.records.Lookup(ctx, id)
	if errors.Is(err, wire.ErrNoOutcome) {
		s.noOutput(w, r, id)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if rec.Outcome != schemas.OutcomeSucceeded {
		writeProblem(w, newProblem(http.StatusNotFound, probNoOutput,
			fmt.Sprintf("request %s ended %s: it has no output", id, rec.Outcome)).with("request_status", string(rec.Outcome)))
		return
	}
	if rec.OutputRef == nil {
		out := rec.Output
		if len(out) == 0 {
			out = []byte("null")
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		_, _ = w.Write(out)
		return
	}
	s.streamObject(w, r, rec)
}

// noOutput answers for a request without a record: not-found when nothing
// is known of it, no-output with its status otherwise.
func (s *Server) noOutput(w http.ResponseWriter, r *http.Request, id string) {
	st, err := s.statusOf(r.Context(), id)
	switch {
	case errors.Is(err, errNotFound):
		writeProblem(w, newProblem(http.StatusNotFound, probNotFound, "no request "+id+" is known").field("id"))
	case err != nil:
		s.fail(w, r, err)
	default:
		writeProblem(w, newProblem(http.StatusNotFound, probNoOutput,
			fmt.Sprintf("request %s is %s: no output yet", id, st.Status)).with("request_status", st.Status))
	}
}

// streamObject copies a large output from its object store bucket to w
// without holding it in memory.
func (s *Server) streamObject(w http.ResponseWriter, r *http.Request, rec *schemas.OutcomeEvent) {
	ref := rec.OutputRef
	ob, err := s.outputs.get(r.Context(), ref.Bucket)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	obj, err := ob.Get(r.Context(), ref.Name)
	if err != nil {
		s.fail(w, r, fmt.Errorf("output of %s in %s/%s: %w", rec.RequestID, ref.Bucket, ref.Name, err))
		return
	}
	defer obj.Close()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.FormatInt(ref.Size, 10))
	w.Header().Set("Digest", ref.Digest)
	if _, err := io.Copy(w, obj); err != nil {
		s.log.Warn().Err(err).Str("request_id", rec.RequestID).Msg("api: output stream cut")
	}
}

// objectStores caches object store handles by bucket (each lookup is a
// round trip).
type objectStores struct {
	js     jetstream.JetStream
	mu     sync.Mutex
	byName map[string]jetstream.ObjectStore
}

func (o *objectStores) get(ctx context.Context, bucket string) (jetstream.ObjectStore, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ob, ok := o.byName[bucket]; ok {
		return ob, nil
	}
	ob, err := o.js.ObjectStore(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("outputs bucket %s: %w", bucket, err)
	}
	o.byName[bucket] = ob
	return ob, nil
}
