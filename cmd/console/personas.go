package console

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
)

// pauseForever is the date a pause without an end is given, as `persona
// pause` does: the server wants one, the operator means "until resumed".
const pauseForever = 100 * 365 * 24 * time.Hour

// personaRow is one persona as the overview shows it (the same numbers as
// `personaq persona ls`).
type personaRow struct {
	Name        string
	Pending     uint64
	InFlight    int
	Redelivered int
	Paused      bool
	PausedText  string
	Unserved    bool
	Oldest      time.Time
	Stats       hourStats
	Outcomes    barChart
	Retries     barChart
}

// listPersonas reads every persona consumer (durable personaq-*) and the
// personas whose requests wait unserved.
func (s *Server) listPersonas(ctx context.Context) ([]personaRow, error) {
	st, err := s.js.Stream(ctx, s.topo.RequestsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", s.topo.RequestsStream, err)
	}
	rows := []personaRow{}
	lister := st.ListConsumers(ctx)
	for info := range lister.Info() {
		if name, ok := strings.CutPrefix(info.Name, wire.Durable("")); ok {
			rows = append(rows, personaRow{Name: name, Pending: info.NumPending, InFlight: info.NumAckPending,
				Redelivered: info.NumRedelivered, Paused: info.Paused, PausedText: pausedText(info, s.cfg.Now())})
		}
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("list consumers of %s: %w", s.topo.RequestsStream, err)
	}
	unserved, err := wire.UnservedRequests(ctx, s.js, s.topo)
	if err != nil {
		return nil, err
	}
	for _, u := range unserved {
		rows = append(rows, personaRow{Name: u.Persona, Pending: u.Pending, Unserved: true, Oldest: u.Oldest})
	}
	slices.SortFunc(rows, func(a, b personaRow) int { return strings.Compare(a.Name, b.Name) })
	return rows, nil
}

func pausedText(info *jetstream.ConsumerInfo, now time.Time) string {
	switch {
	case !info.Paused:
		return ""
	case info.Config.PauseUntil == nil || info.PauseRemaining > pauseForever/2:
		return "paused until resumed"
	}
	return "paused until " + info.Config.PauseUntil.UTC().Format(time.RFC3339) + " (" + info.Config.PauseUntil.Sub(now).Round(time.Second).String() + " left)"
}

func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	s.setPaused(w, r, true)
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	s.setPaused(w, r, false)
}

// setPaused pauses (until resumed) or resumes a persona's durable consumer,
// which every replica shares.
func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	name := r.PathValue("name")
	durable := wire.Durable(name)
	if _, err := s.js.Consumer(r.Context(), s.topo.RequestsStream, durable); err != nil {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("unknown persona %q: %w", name, err))
		return
	}
	var err error
	if paused {
		_, err = s.js.PauseConsumer(r.Context(), s.topo.RequestsStream, durable, s.cfg.Now().Add(pauseForever))
	} else {
		_, err = s.js.ResumeConsumer(r.Context(), s.topo.RequestsStream, durable)
	}
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, fmt.Errorf("pause/resume %s (needs nats-server 2.11 or newer): %w", durable, err))
		return
	}
	s.log.Info().Str("persona", name).Bool("paused", paused).Msg("console: persona pause changed")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
