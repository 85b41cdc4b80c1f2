package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/schemas"
)

// filterForm is the quarantine filter as typed (reason, persona, task,
// since), echoed back into the form and the paging links.
type filterForm struct {
	Reasons []string
	Persona string
	Task    string
	Since   string
}

func readFilter(v url.Values) filterForm {
	var f filterForm
	for _, r := range v["reason"] {
		for p := range strings.SplitSeq(r, ",") {
			if p = strings.TrimSpace(p); p != "" && !slices.Contains(f.Reasons, p) {
				f.Reasons = append(f.Reasons, p)
			}
		}
	}
	f.Persona, f.Task, f.Since = strings.TrimSpace(v.Get("persona")), strings.TrimSpace(v.Get("task")), strings.TrimSpace(v.Get("since"))
	return f
}

// filter turns the form into a dlq.Filter; since takes a duration ago
// (1h) or an RFC 3339 time, as the CLI's --since.
func (f filterForm) filter(now time.Time) (dlq.Filter, error) {
	out := dlq.Filter{Persona: f.Persona, Task: f.Task}
	for _, r := range f.Reasons {
		out.Reasons = append(out.Reasons, schemas.Reason(r))
	}
	if f.Since != "" {
		if d, err := time.ParseDuration(f.Since); err == nil && d > 0 {
			out.Since = now.Add(-d)
		} else if t, err := time.Parse(time.RFC3339, f.Since); err == nil {
			out.Since = t
		} else {
			return out, fmt.Errorf("%w: since %q (want a duration like 1h or an RFC 3339 time)", dlq.ErrInvalidFilter, f.Since)
		}
	}
	return out, out.Validate()
}

// query is the filter as URL parameters.
func (f filterForm) query() url.Values {
	v := url.Values{}
	for _, r := range f.Reasons {
		v.Add("reason", r)
	}
	for k, s := range map[string]string{"persona": f.Persona, "task": f.Task, "since": f.Since} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// Has reports whether reason r is selected (for the form's checkboxes).
func (f filterForm) Has(r schemas.Reason) bool { return slices.Contains(f.Reasons, string(r)) }

// Any reports whether any filter is set.
func (f filterForm) Any() bool { return len(f.query()) > 0 }

type quarantineView struct {
	Filter   filterForm
	Reasons  []schemas.Reason
	Entries  []rowView
	Total    int
	Page     int
	Pages    int
	PrevURL  string
	NextURL  string
	Duration string
}

type rowView struct {
	Seq      uint64
	Reason   string
	Persona  string
	Task     string
	Attempts int
	StoredAt time.Time
	LastErr  string
}

func (s *Server) quarantineList(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	q := r.URL.Query()
	v := quarantineView{Filter: readFilter(q), Reasons: schemas.Reasons, Page: max(atoi(q.Get("page")), 1)}
	f, err := v.Filter.filter(s.cfg.Now())
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	seqs, err := s.selectSeqs(r.Context(), f)
	if err != nil {
		s.fail(w, r, statusOf(err), err)
		return
	}
	entries, err := s.entries(r.Context(), pageOf(seqs, v.Page, s.cfg.PageSize))
	if err != nil {
		s.fail(w, r, statusOf(err), err)
		return
	}
	v.Total, v.Pages = len(seqs), max((len(seqs)+s.cfg.PageSize-1)/s.cfg.PageSize, 1)
	for _, e := range entries {
		v.Entries = append(v.Entries, rowOf(e))
	}
	v.PrevURL, v.NextURL = pageURL(v.Filter, v.Page-1, v.Pages), pageURL(v.Filter, v.Page+1, v.Pages)
	v.Duration = time.Since(start).Round(time.Millisecond).String()
	s.render(w, r, http.StatusOK, "quarantine", page{Title: "Quarantine", Nav: "quarantine", Data: v})
}

func pageURL(f filterForm, p, pages int) string {
	if p < 1 || p > pages {
		return ""
	}
	q := f.query()
	q.Set("page", strconv.Itoa(p))
	return "/quarantine?" + q.Encode()
}

func rowOf(e dlq.Entry) rowView {
	v := rowView{Seq: e.Seq, Reason: string(e.Reason()), StoredAt: e.StoredAt, LastErr: e.Err}
	if rec := e.Record; rec != nil {
		v.Persona, v.Task, v.Attempts, v.LastErr = rec.Persona, rec.TaskID, rec.Attempts, rec.Detail
		if n := len(rec.Errors); n > 0 && rec.Errors[n-1].Error != "" {
			v.LastErr = rec.Errors[n-1].Error
		}
	}
	return v
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func statusOf(err error) int {
	switch {
	case errors.Is(err, dlq.ErrInvalidFilter):
		return http.StatusBadRequest
	case errors.Is(err, dlq.ErrNotFound), errors.Is(err, dlq.ErrStreamMissing):
		return http.StatusNotFound
	}
	return http.StatusBadGateway
}

// recordView is one record's page.
type recordView struct {
	Entry   dlq.Entry
	Rec     *schemas.QuarantineRecord
	Headers []header
	Payload string
	Errors  []historyRow
}

type header struct{ Name, Value string }

type historyRow struct {
	schemas.AttemptRecord
	Offset string
}

// payloadShown bounds the payload a record page shows.
const payloadShown = 64 << 10

func (s *Server) quarantineRecord(w http.ResponseWriter, r *http.Request) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("bad sequence %q", r.PathValue("seq")))
		return
	}
	e, err := s.insp.Get(r.Context(), seq)
	if err != nil {
		s.fail(w, r, statusOf(err), err)
		return
	}
	v := recordView{Entry: *e, Rec: e.Record}
	if rec := e.Record; rec != nil {
		v.Headers, v.Payload, v.Errors = headersOf(rec.Headers), pretty(rec.Payload), historyOf(rec.Errors)
	}
	s.render(w, r, http.StatusOK, "record", page{Title: fmt.Sprintf("Record %d", seq), Nav: "quarantine", Data: v})
}

func headersOf(h map[string][]string) []header {
	var out []header
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, header{k, v})
		}
	}
	slices.SortFunc(out, func(a, b header) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func pretty(p []byte) string {
	if len(p) > payloadShown {
		return string(p[:payloadShown]) + fmt.Sprintf("\n… (%d more bytes)", len(p)-payloadShown)
	}
	var b bytes.Buffer
	if json.Indent(&b, p, "", "  ") == nil {
		return b.String()
	}
	return string(p)
}

func historyOf(errs []schemas.AttemptRecord) []historyRow {
	out := make([]historyRow, len(errs))
	for i, a := range errs {
		out[i] = historyRow{AttemptRecord: a, Offset: "+" + a.At.Sub(errs[0].At).Round(time.Millisecond).String()}
	}
	return out
}
