package console

import (
	"cmp"
	"net/http"
	"slices"
)

// overviewView is the overview page: personas and the quarantine by reason.
type overviewView struct {
	Personas   []personaRow
	PersonaErr string
	Reasons    []countRow
	Total      uint64
	Bytes      uint64
	StatsErr   string
	Window     string
	LastEvent  uint64
}

type countRow struct {
	Name  string
	Count uint64
	Pct   int
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	v := overviewView{Window: s.cfg.Window.String()}
	v.Personas, v.PersonaErr = s.personaRows(r)
	st, err := s.insp.Stats(r.Context())
	if err != nil {
		v.StatsErr = err.Error()
	} else {
		v.Total, v.Bytes = st.Total, st.Bytes
		v.Reasons = sortedCounts(st.ByReason, st.Total)
	}
	_, v.LastEvent = s.feed.ring.recent(0)
	s.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Data: v})
}

// personasFragment is the persona table alone, for the overview's live
// refresh.
func (s *Server) personasFragment(w http.ResponseWriter, r *http.Request) {
	v := overviewView{Window: s.cfg.Window.String()}
	v.Personas, v.PersonaErr = s.personaRows(r)
	s.render(w, r, http.StatusOK, "frag_personas", page{Data: v})
}

func (s *Server) personaRows(r *http.Request) ([]personaRow, string) {
	rows, err := s.listPersonas(r.Context())
	if err != nil {
		return nil, err.Error()
	}
	for i := range rows {
		series := s.feed.counts.series(rows[i].Name)
		rows[i].Stats = sum(series)
		rows[i].Outcomes = outcomeChart(series, "outcomes of "+rows[i].Name+" per minute")
		rows[i].Retries = retryChart(series, "retries of "+rows[i].Name+" per minute")
	}
	return rows, ""
}

func sortedCounts(m map[string]uint64, total uint64) []countRow {
	out := make([]countRow, 0, len(m))
	for k, n := range m {
		out = append(out, countRow{Name: k, Count: n, Pct: pct(int(n), int(total))})
	}
	slices.SortFunc(out, func(a, b countRow) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Name, b.Name))
	})
	return out
}
