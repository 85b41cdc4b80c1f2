package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/consumers/loop"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas/openapi"
)

// Server serves the HTTP API. Start it before serving Handler; Stop ends
// its subscription and index.
type Server struct {
	cfg       Config
	js        jetstream.JetStream
	nc        *nats.Conn
	client    *client.Client
	records   *wire.Outcomes
	submitter *wire.Submitter
	tokens    *tokenSet
	log       zerolog.Logger
	waiters   *waiters
	index     *index
	outputs   objectStores
	outputHub *outputHub // live output, for the event streams
	handler   http.Handler
	lookups   chan struct{} // bounds concurrent status lookups
	parkMu    sync.Mutex
	parkedSet map[*parked]struct{}
	lookupQ   chan *parked // parked long-polls' first lookups

	mu      sync.Mutex
	cancel  context.CancelFunc
	loops   *loop.Group
	started bool
}

// New validates cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With().Str("component", "api").Logger()
	c, err := client.New(client.Config{JetStream: cfg.JetStream, Topology: cfg.Topology, Logger: &log})
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	s := &Server{
		cfg: cfg, js: cfg.JetStream, nc: cfg.JetStream.Conn(), client: c, log: log,
		records: wire.NewOutcomes(cfg.JetStream, cfg.Topology), tokens: newTokenSet(cfg.Tokens),
		waiters: newWaiters(log), index: newIndex(cfg.IndexSize, log), lookups: make(chan struct{}, cfg.MaxLookups),
		parkedSet: map[*parked]struct{}{}, lookupQ: make(chan *parked, 1<<16),
	}
	// What this process saw is in its list at once (read your writes): its
	// own submits, and the records its subscription delivers, ahead of the
	// streams the index follows.
	s.waiters.seen = s.index.applyRecord
	s.submitter = wire.NewSubmitter(cfg.JetStream, cfg.Topology, s.records)
	s.outputs = objectStores{js: cfg.JetStream, byName: map[string]jetstream.ObjectStore{}}
	s.outputHub = newOutputHub(cfg.Topology)
	s.handler = s.routes()
	return s, nil
}

// Start subscribes to the outcomes subjects (waking waiters) and starts
// following the attempts and outcomes streams into the request index. It
// needs NATS; Stop undoes it.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return nil
	}
	if err := s.waiters.subscribe(s.nc, s.cfg.Topology.OutcomesPrefix); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel, s.started = cancel, true
	loops := []func(context.Context){
		s.watchReconnects,
		func(ctx context.Context) { s.index.follow(ctx, s.js, s.cfg.Topology) },
		func(ctx context.Context) { s.outputHub.follow(ctx, s.js, s.cfg.Topology.Output.Stream) },
	}
	for range s.cfg.MaxLookups {
		loops = append(loops, s.lookupWorker)
	}
	s.loops = &loop.Group{}
	s.loops.Start(ctx, loops...)
	return nil
}

// Stop ends what Start began; it is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return
	}
	s.started = false
	s.cancel() // the loops end first; parked waiters are then let go
	s.waiters.stop()
	s.closeParked()
	s.loops.Stop()
}

// Handler serves /v1/... and /healthz.
func (s *Server) Handler() http.Handler { return s.handler }

// Waiting is the number of long-polls and event streams waiting for a
// terminal record (for tests and metrics).
func (s *Server) Waiting() int { return s.waiters.count() }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	read := func(h http.HandlerFunc) http.HandlerFunc { return s.authorize(ScopeRead, s.needNATS(h)) }
	mux.HandleFunc("POST /v1/requests", s.authorize(ScopeSubmit, s.needNATS(s.submit)))
	mux.HandleFunc("GET /v1/requests", read(s.list))
	mux.HandleFunc("GET /v1/requests/{id}", read(s.get))
	mux.HandleFunc("GET /v1/requests/{id}/output", read(s.output))
	mux.HandleFunc("GET /v1/requests/{id}/events", read(s.events))
	mux.HandleFunc("GET /v1/personas", read(s.personas))
	mux.HandleFunc("POST /v1/requests/{id}/cancel", s.authorize(ScopeCancel, s.needNATS(s.cancelRequest)))
	mux.HandleFunc("POST /v1/tasks/{task_id}/cancel", s.authorize(ScopeCancel, s.needNATS(s.cancelTask)))
	mux.HandleFunc("GET /v1/openapi.json", s.authorize(ScopeRead, serveOpenAPI))
	mux.HandleFunc("GET /healthz", s.health)
	for _, p := range []string{"/v1/requests", "/v1/requests/{id}", "/v1/requests/{id}/output", "/v1/requests/{id}/events",
		"/v1/personas", "/v1/openapi.json", "/healthz", "/v1/requests/{id}/cancel", "/v1/tasks/{task_id}/cancel"} {
		mux.HandleFunc(p, methodNotAllowed)
	}
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, newProblem(http.StatusNotFound, probNotFound, "no route "+r.URL.Path))
	})
	return mux
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, newProblem(http.StatusMethodNotAllowed, probMethod, r.Method+" is not served on "+r.URL.Path))
}

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openapi.Document)
}

// watchReconnects tells every waiter to look again after NATS reconnects.
func (s *Server) watchReconnects(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	seen := s.nc.Stats().Reconnects
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n := s.nc.Stats().Reconnects; n != seen && s.nc.IsConnected() {
			seen = n
			s.log.Info().Uint64("reconnects", n).Msg("api: NATS reconnected; waiters look their records up again")
			s.waiters.recheckAll()
		}
	}
}

// needNATS answers 503 with Retry-After while NATS is unreachable.
func (s *Server) needNATS(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.nc.IsConnected() {
			s.unavailable(w, errors.New("not connected to NATS ("+s.nc.Status().String()+")"))
			return
		}
		h(w, r)
	}
}

func (s *Server) unavailable(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", fmt.Sprint(int(s.cfg.RetryAfter.Round(time.Second).Seconds())))
	writeProblem(w, newProblem(http.StatusServiceUnavailable, probUnavailable, "NATS is unreachable: "+err.Error()))
}

// fail answers an error from NATS: 503 when NATS is unreachable or did
// not answer, 500 otherwise.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if isUnavailable(err) || !s.nc.IsConnected() {
		s.unavailable(w, err)
		return
	}
	s.log.Error().Err(err).Str("path", r.URL.Path).Msg("api: request failed")
	writeProblem(w, newProblem(http.StatusInternalServerError, "internal", err.Error()))
}

func isUnavailable(err error) bool {
	for _, e := range []error{nats.ErrConnectionClosed, nats.ErrConnectionReconnecting, nats.ErrDisconnected,
		nats.ErrTimeout, nats.ErrNoResponders, context.DeadlineExceeded, jetstream.ErrNoStreamResponse,
		jetstream.ErrJetStreamNotEnabled, nats.ErrConnectionDraining} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// health answers 200 while NATS is reachable, 503 otherwise (no token).
func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	if !s.nc.IsConnected() {
		w.Header().Set("Retry-After", fmt.Sprint(int(s.cfg.RetryAfter.Round(time.Second).Seconds())))
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "detail": "NATS is unreachable"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
