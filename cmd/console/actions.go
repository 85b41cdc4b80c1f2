package console

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/personaq/personaq/dlq"
)

// previewShown is how many records a dry run lists.
const previewShown = 20

type previewView struct {
	Replay []dlq.ReplayItem
	Purge  []rowView
	More   int
	Err    string
}

// plan makes a replay or purge job from the named records (seq fields) or
// every record a filter selects (all=1), and shows its dry run.
func (s *Server) plan(w http.ResponseWriter, r *http.Request) {
	kind := r.PostFormValue("kind")
	if kind != "replay" && kind != "purge" {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("unknown action %q (want replay or purge)", kind))
		return
	}
	seqs, what, err := s.selection(r)
	if err != nil {
		s.fail(w, r, statusOf(err), err)
		return
	}
	j := &job{Kind: kind, What: what, Seqs: seqs, Created: s.cfg.Now()}
	j.Preview = s.preview(r, kind, seqs)
	s.jobs.add(j)
	http.Redirect(w, r, "/jobs/"+j.ID, http.StatusSeeOther)
}

// selection reads the records a plan acts on and says which in words.
func (s *Server) selection(r *http.Request) ([]uint64, string, error) {
	if err := r.ParseForm(); err != nil {
		return nil, "", fmt.Errorf("%w: %w", dlq.ErrInvalidFilter, err)
	}
	var seqs []uint64
	for _, v := range r.PostForm["seq"] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, "", fmt.Errorf("%w: sequence %q", dlq.ErrInvalidFilter, v)
		}
		seqs = append(seqs, n)
	}
	if len(seqs) > 0 {
		return seqs, "records " + joinSeqs(seqs), nil
	}
	if r.PostFormValue("all") != "1" {
		return nil, "", fmt.Errorf("%w: select records, or act on all that match the filter", dlq.ErrInvalidFilter)
	}
	ff := readFilter(r.PostForm)
	f, err := ff.filter(s.cfg.Now())
	if err != nil {
		return nil, "", err
	}
	seqs, err = s.selectSeqs(r.Context(), f)
	what := "every record"
	if ff.Any() {
		what = "every record matching " + ff.query().Encode()
	}
	return seqs, what, err
}

func joinSeqs(seqs []uint64) string {
	parts := make([]string, 0, min(len(seqs), 10))
	for _, s := range seqs[:min(len(seqs), 10)] {
		parts = append(parts, strconv.FormatUint(s, 10))
	}
	if len(seqs) > 10 {
		parts = append(parts, fmt.Sprintf("… (%d in all)", len(seqs)))
	}
	return strings.Join(parts, ", ")
}

// preview is the dry run of the first records: what a replay would
// publish, or which records a purge would delete.
func (s *Server) preview(r *http.Request, kind string, seqs []uint64) previewView {
	first := seqs[:min(len(seqs), previewShown)]
	v := previewView{More: len(seqs) - len(first)}
	if len(first) == 0 {
		return v
	}
	if kind == "purge" {
		entries, err := s.entries(r.Context(), first)
		for _, e := range entries {
			v.Purge = append(v.Purge, rowOf(e))
		}
		if err != nil {
			v.Err = err.Error()
		}
		return v
	}
	rep, err := s.insp.Replay(r.Context(), dlq.Selection{Seqs: first}, dlq.ReplayOptions{DryRun: true})
	if err != nil {
		v.Err = err.Error()
		return v
	}
	v.Replay = rep.Items
	return v
}

type jobView struct {
	Job    *job
	Status jobStatus
	Age    time.Duration
}

func (s *Server) jobPage(w http.ResponseWriter, r *http.Request) {
	j := s.jobs.get(r.PathValue("id"))
	if j == nil {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no job %q (jobs live in this console's memory)", r.PathValue("id")))
		return
	}
	st, _ := j.status()
	s.render(w, r, http.StatusOK, "job", page{Title: "Quarantine " + j.Kind, Nav: "quarantine", Data: jobView{Job: j, Status: st}})
}

func (s *Server) runJob(w http.ResponseWriter, r *http.Request) {
	j := s.jobs.get(r.PathValue("id"))
	if j == nil {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no job %q", r.PathValue("id")))
		return
	}
	if !s.jobs.run(j) {
		s.fail(w, r, http.StatusConflict, fmt.Errorf("job %s has already run", j.ID))
		return
	}
	http.Redirect(w, r, "/jobs/"+j.ID, http.StatusSeeOther)
}

// jobEventGap spaces a job's status events: a bulk replay changes its
// status once a record.
const jobEventGap = 100 * time.Millisecond

// jobEvents streams a job's status until it has finished.
func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request) {
	j := s.jobs.get(r.PathValue("id"))
	if j == nil {
		http.NotFound(w, r)
		return
	}
	sse, ok := newSSE(w)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	for {
		st, changed := j.status()
		if sse.send("status", 0, st) != nil || st.State == jobFinished {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(jobEventGap):
		}
		select {
		case <-r.Context().Done():
			return
		case <-changed:
		case <-time.After(pingEvery):
		}
	}
}
