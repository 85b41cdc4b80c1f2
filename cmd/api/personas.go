package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Persona is one served persona as GET /v1/personas shows it: what its
// durable consumer's metadata says (the policy every replica wrote there).
type Persona struct {
	Name             string  `json:"name"`
	Policy           string  `json:"policy"`
	MaxAttempts      int     `json:"max_attempts"`
	AttemptTimeoutMs int64   `json:"attempt_timeout_ms"`
	BackoffsMs       []int64 `json:"backoffs_ms"`
	Schedule         string  `json:"schedule"`
	StepBudgetMs     int64   `json:"step_budget_ms"`
	Pending          uint64  `json:"pending"`
	InFlight         int     `json:"in_flight"`
	Paused           bool    `json:"paused"`
}

func (s *Server) personas(w http.ResponseWriter, r *http.Request) {
	ps, err := s.servedPersonas(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"personas": ps})
}

// servedNames lists the personas some replica serves, sorted.
func (s *Server) servedNames(ctx context.Context) ([]string, error) {
	ps, err := s.servedPersonas(ctx)
	names := make([]string, 0, len(ps))
	for _, p := range ps {
		names = append(names, p.Name)
	}
	return names, err
}

func (s *Server) servedPersonas(ctx context.Context) ([]Persona, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
	defer cancel()
	st, err := s.js.Stream(ctx, s.cfg.Topology.RequestsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return []Persona{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("requests stream %s: %w", s.cfg.Topology.RequestsStream, err)
	}
	out := []Persona{}
	lister := st.ListConsumers(ctx)
	for info := range lister.Info() {
		name, ok := strings.CutPrefix(info.Name, wire.Durable(""))
		if !ok {
			continue
		}
		p, err := s.persona(ctx, name)
		if err != nil {
			s.log.Warn().Err(err).Str("persona", name).Msg("api: persona without readable policy metadata")
			continue
		}
		p.Pending, p.InFlight, p.Paused = info.NumPending, info.NumAckPending, info.Paused
		out = append(out, p)
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("list consumers of %s: %w", s.cfg.Topology.RequestsStream, err)
	}
	slices.SortFunc(out, func(a, b Persona) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// persona reads one persona's policy and its step budget for a request
// that names no policy of its own.
func (s *Server) persona(ctx context.Context, name string) (Persona, error) {
	info, err := wire.LookupPersona(ctx, s.js, s.cfg.Topology, name)
	if err != nil {
		return Persona{}, err
	}
	b, err := info.Budget(&schemas.PersonaRequest{Persona: name}, retry.Preset)
	if err != nil {
		return Persona{}, err
	}
	p := Persona{Name: name, Policy: info.Policy, MaxAttempts: info.MaxAttempts,
		AttemptTimeoutMs: info.AttemptTimeout.Milliseconds(), StepBudgetMs: b.StepDeadline.Milliseconds(), BackoffsMs: []int64{}}
	parts := make([]string, 0, len(info.Backoffs))
	for _, d := range info.Backoffs {
		p.BackoffsMs = append(p.BackoffsMs, d.Milliseconds())
		parts = append(parts, d.Round(time.Millisecond).String())
	}
	p.Schedule = "backoffs " + strings.Join(parts, ", ")
	if len(parts) == 0 {
		p.Schedule = "no retries"
	}
	return p, nil
}
