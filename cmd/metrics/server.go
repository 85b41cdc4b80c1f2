package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/personaq/personaq/schemas"
)

// ConnStatus is what readiness asks of the NATS connection; *nats.Conn
// implements it.
type ConnStatus interface {
	Status() nats.Status
}

// Readier is what readiness asks of the runtime; *consumers.Runtime
// implements it (nil: consumers bound and ledger reachable).
type Readier interface {
	Ready() error
}

// ServerConfig configures a Server.
type ServerConfig struct {
	// Addr is the host:port to listen on, e.g. ":9090" or "127.0.0.1:0".
	// Required.
	Addr string
	// Gatherer is what /metrics serves: the registry given to New.
	// Required.
	Gatherer prometheus.Gatherer
	// NATS is the connection readiness checks. Required.
	NATS ConnStatus
	// Runtime is the replica readiness checks. Required.
	Runtime Readier
	// ShutdownTimeout bounds how long Shutdown waits for open requests
	// when its context has no deadline. Default: 5s.
	ShutdownTimeout time.Duration
}

// ErrInvalidConfig wraps every configuration error, naming the field. It
// is schemas.ErrInvalidConfig, the same error in every personaq package:
// errors.Is matches it whichever package returned it.
var ErrInvalidConfig = schemas.ErrInvalidConfig

func (c ServerConfig) validate() error {
	switch {
	case c.Addr == "":
		return fmt.Errorf("%w: addr: required", ErrInvalidConfig)
	case c.Gatherer == nil:
		return fmt.Errorf("%w: gatherer: required", ErrInvalidConfig)
	case c.NATS == nil:
		return fmt.Errorf("%w: nats: required", ErrInvalidConfig)
	case c.Runtime == nil:
		return fmt.Errorf("%w: runtime: required", ErrInvalidConfig)
	case c.ShutdownTimeout < 0:
		return fmt.Errorf("%w: shutdown_timeout: must not be negative", ErrInvalidConfig)
	}
	return nil
}

// Server serves /metrics, /healthz and /readyz on one listener.
type Server struct {
	cfg  ServerConfig
	http *http.Server

	mu       sync.Mutex
	ln       net.Listener
	served   chan struct{} // closed when Serve has returned
	serveErr error
	stopOnce sync.Once
	stopErr  error
}

// NewServer validates cfg and builds a Server; Start opens the listener.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 5 * time.Second
	}
	s := &Server{cfg: cfg}
	s.http = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	return s, nil
}

// Handler is the server's routes, for tests or another mux.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeLine(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := s.Ready(); err != nil {
			writeLine(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
			return
		}
		writeLine(w, http.StatusOK, "ready")
	})
	return mux
}

// Ready is what /readyz answers: nil when the NATS connection is CONNECTED
// and the runtime is ready, otherwise why not.
func (s *Server) Ready() error {
	if st := s.cfg.NATS.Status(); st != nats.CONNECTED {
		return fmt.Errorf("nats connection %s", st)
	}
	return s.cfg.Runtime.Ready()
}

func writeLine(w http.ResponseWriter, code int, line string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, line)
}

// Start opens the listener (so a taken port fails here) and serves in the
// background until ctx ends or Shutdown is called. It may be called once.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return errors.New("metrics server: already started")
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("metrics server: listen %s: %w", s.cfg.Addr, err)
	}
	s.ln, s.served = ln, make(chan struct{})
	go func() {
		defer close(s.served)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.serveErr = err
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Shutdown(context.Background())
		case <-s.served:
		}
	}()
	return nil
}

// Addr is the address the server listens on (useful with port 0), or nil
// before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Shutdown stops accepting connections and waits for open requests, up to
// ctx's deadline (ShutdownTimeout when it has none). It is idempotent and
// returns the first shutdown's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
			defer cancel()
		}
		s.stopErr = s.http.Shutdown(ctx)
		s.mu.Lock()
		served := s.served
		s.mu.Unlock()
		if served != nil {
			<-served
			if s.stopErr == nil {
				s.stopErr = s.serveErr
			}
		}
	})
	return s.stopErr
}
