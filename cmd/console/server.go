package console

import (
	"context"
	"errors"
	"io/fs"
	"net/http"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/dlq"
)

// Server serves the console. Start it (the live feed) before serving.
type Server struct {
	cfg  Config
	js   jetstream.JetStream
	topo wire.Topology
	log  zerolog.Logger
	insp *dlq.Inspector
	recs *wire.Outcomes
	tmpl templates
	auth *auth
	feed *feed
	jobs *jobs
}

// New validates cfg and builds a Server.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	insp, err := dlq.NewInspector(dlq.InspectorConfig{
		JetStream: cfg.JetStream, Stream: cfg.Topology.QuarantineStream, Prefix: cfg.Topology.QuarantinePrefix, Now: cfg.Now,
	})
	if err != nil {
		return nil, err
	}
	tmpl, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, js: cfg.JetStream, topo: cfg.Topology, recs: wire.NewOutcomes(cfg.JetStream, cfg.Topology), log: cfg.Logger.With().Str("component", "console").Logger(),
		insp: insp, tmpl: tmpl, auth: &auth{token: cfg.Token, readOnly: cfg.ReadOnly},
	}
	s.feed = newFeed(cfg.JetStream, cfg.Topology, cfg.Window, cfg.Now, s.log)
	s.jobs = newJobs(insp, s.log)
	return s, nil
}

// Start follows the outcomes and attempts streams (from Window ago) for the
// overview's charts and the live page, until ctx ends or Stop.
func (s *Server) Start(ctx context.Context) { s.feed.start(ctx) }

// Stop ends the feed and any running job, and waits for them.
func (s *Server) Stop() {
	s.feed.stop()
	s.jobs.stop()
}

// Handler returns the console's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.overview)
	mux.HandleFunc("GET /fragments/personas", s.personasFragment)
	mux.HandleFunc("GET /quarantine", s.quarantineList)
	mux.HandleFunc("GET /quarantine/{seq}", s.quarantineRecord)
	mux.HandleFunc("GET /task", s.taskPage)
	mux.HandleFunc("GET /live", s.livePage)
	mux.HandleFunc("GET /events", s.liveEvents)
	mux.HandleFunc("GET /requests/{id}/output", s.requestOutput)
	mux.HandleFunc("GET /jobs/{id}", s.jobPage)
	mux.HandleFunc("GET /jobs/{id}/events", s.jobEvents)
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.loginSubmit)
	mux.HandleFunc("POST /logout", s.logoutSubmit)
	mux.Handle("POST /personas/{name}/pause", s.mutation(s.pause))
	mux.Handle("POST /personas/{name}/resume", s.mutation(s.resume))
	mux.Handle("POST /quarantine/plan", s.mutation(s.plan))
	mux.Handle("POST /jobs/{id}/run", s.mutation(s.runJob))
	mux.Handle("POST /cancel", s.mutation(s.cancel))
	return secureHeaders(s.auth.withCSRF(mux))
}

// mutation refuses a request without the token or the CSRF token (403).
func (s *Server) mutation(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if err := s.auth.allow(r); err != nil {
			s.log.Warn().Str("path", r.URL.Path).Str("why", err.Error()).Msg("console: mutation refused")
			msg := "this action needs the console token: log in first (or send Authorization: Bearer)"
			if errors.Is(err, errReadOnly) {
				msg = err.Error()
			}
			s.fail(w, r, http.StatusForbidden, errors.New(msg))
			return
		}
		h(w, r)
	})
}

// secureHeaders: no inline script or style, no framing, no sniffing.
func secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login", page{Title: "Log in", Data: r.URL.Query().Get("next")})
}

func (s *Server) loginSubmit(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	if !s.auth.login(w, r) {
		s.log.Warn().Msg("console: login refused")
		s.fail(w, r, http.StatusForbidden, errors.New("wrong token (or the form expired: reload the login page)"))
		return
	}
	s.log.Info().Msg("console: operator logged in")
	http.Redirect(w, r, localPath(r.PostFormValue("next")), http.StatusSeeOther)
}

func (s *Server) logoutSubmit(w http.ResponseWriter, r *http.Request) {
	logout(w)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// localPath keeps a redirect on this site.
func localPath(p string) string {
	if len(p) < 1 || p[0] != '/' || (len(p) > 1 && (p[1] == '/' || p[1] == '\\')) {
		return "/"
	}
	return p
}
