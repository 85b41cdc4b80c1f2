package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

type taskView struct {
	Query     string
	TaskID    string
	Steps     []stepView
	Note      string
	HasLedger bool
	// Ledger names the attempt ledger the page reads ("" without one).
	Ledger string
}

// stepView is one request of one step, as `personaq task show` shows it.
type stepView struct {
	Step      string
	RequestID string
	State     string
	Attempts  []attemptRow
	Timeline  *timeline
	Progress  *progressChart
	Record    *schemas.OutcomeEvent
	Output    string
	RecordErr string
}

type attemptRow struct {
	Number   int
	Agent    string
	Class    string
	Progress string
	Duration string
	NextIn   string
	Error    string
	At       time.Time
	// Tokens is "input/output" tokens (and the cost) the attempt reported.
	Tokens string
}

// outputShown bounds the output the task page shows.
const outputShown = 16 << 10

func (s *Server) taskPage(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	v := taskView{Query: q, HasLedger: s.cfg.Ledger != nil, Ledger: s.ledgerName()}
	if q != "" {
		if err := s.loadTask(r.Context(), q, &v); err != nil {
			v.Note = err.Error()
		}
	}
	s.render(w, r, http.StatusOK, "task", page{Title: "Task", Nav: "task", Data: v})
}

// loadTask finds q as a task id in the ledger, or else as a request id
// (its terminal record or attempt events name the task). When the ledger
// knows nothing of the task (or there is none), the task's terminal
// records in NATS say whether it ran.
func (s *Server) loadTask(ctx context.Context, q string, v *taskView) error {
	task, rec := q, (*schemas.OutcomeEvent)(nil)
	steps, err := s.steps(ctx, q)
	if (err == nil && len(steps) == 0) || errors.Is(err, errNoLedger) {
		if t, r := s.taskOfRequest(ctx, q); t != "" {
			task, rec = t, r
			steps, err = s.steps(ctx, task)
		}
	}
	v.TaskID = task
	switch {
	case err != nil && !errors.Is(err, errNoLedger):
		return err
	case err == nil && len(steps) > 0:
		v.Steps = steps
		return nil
	}
	v.Steps = s.recordSteps(ctx, task, rec)
	switch {
	case errors.Is(err, errNoLedger):
		return err
	case len(v.Steps) == 0:
		return fmt.Errorf("no attempts recorded for task or request %q in the ledger (%s), and no terminal record in NATS: never run, or expired", q, v.Ledger)
	}
	return nil
}

// stateOtherLedger is the state of a step the ledger knows nothing of but
// whose terminal record is in NATS.
const stateOtherLedger = "ran; attempts recorded in another ledger (or expired from this one)"

// recordSteps are task's steps as its terminal records in NATS show them
// (rec, a record already read, when the scan finds none).
func (s *Server) recordSteps(ctx context.Context, task string, rec *schemas.OutcomeEvent) []stepView {
	var recs []*schemas.OutcomeEvent
	if found, err := s.recs.ForTask(ctx, task); err == nil {
		recs = found.Records
	}
	if len(recs) == 0 && rec != nil {
		recs = []*schemas.OutcomeEvent{rec}
	}
	out := make([]stepView, 0, len(recs))
	for _, r := range recs {
		out = append(out, s.withResult(ctx, stepView{Step: r.Step, RequestID: r.RequestID, State: stateOtherLedger}))
	}
	return out
}

// ledgerName names the ledger the page reads ("" without one).
func (s *Server) ledgerName() string {
	if s.cfg.Ledger == nil {
		return ""
	}
	if d, ok := s.cfg.Ledger.(interface{ Describe() string }); ok {
		return d.Describe()
	}
	return "an attempt ledger"
}

// taskOfRequest returns the task of request id, from its terminal record
// or else its newest attempt event.
func (s *Server) taskOfRequest(ctx context.Context, id string) (string, *schemas.OutcomeEvent) {
	if rec, err := s.recs.Lookup(ctx, id); err == nil {
		return rec.TaskID, rec
	}
	st, err := s.js.Stream(ctx, s.topo.AttemptsStream)
	if err != nil {
		return "", nil
	}
	raw, err := st.GetLastMsgForSubject(ctx, s.topo.AttemptFilter(id))
	if err != nil {
		return "", nil
	}
	if ev, err := schemas.DecodeAttemptEvent(raw.Data); err == nil {
		return ev.TaskID, nil
	}
	return "", nil
}

// steps reads every step of task from the ledger with its result.
func (s *Server) steps(ctx context.Context, task string) ([]stepView, error) {
	if s.cfg.Ledger == nil {
		return nil, errNoLedger
	}
	keys, err := s.cfg.Ledger.Steps(ctx, task)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	out := make([]stepView, 0, len(keys))
	for _, k := range keys {
		hist, st, err := s.cfg.Ledger.History(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
		step, req, _ := strings.Cut(k.Step, "@")
		v := stepView{Step: step, RequestID: req, State: st.String(), Attempts: attemptRows(hist),
			Timeline: newTimeline(hist), Progress: newProgressChart(hist)}
		out = append(out, s.withResult(ctx, v))
	}
	return out, nil
}

// withResult adds the step's terminal record and output, when there is one.
func (s *Server) withResult(ctx context.Context, v stepView) stepView {
	rec, err := s.recs.Lookup(ctx, v.RequestID)
	if err != nil {
		v.RecordErr = "no terminal record yet: " + err.Error()
		return v
	}
	v.Record = rec
	if out, err := s.recs.ReadOutput(ctx, rec); err == nil && len(out) > 0 {
		v.Output = pretty(out[:min(len(out), outputShown)])
	} else if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		v.RecordErr = "output: " + err.Error()
	}
	return v
}

func attemptRows(hist []retry.Attempt) []attemptRow {
	out := make([]attemptRow, len(hist))
	for i, a := range hist {
		row := attemptRow{Number: a.Number, Agent: agentName(a), Class: a.Class.String(), Progress: "-",
			Duration: a.Duration.Round(time.Millisecond).String(), NextIn: "-", Error: a.Error, At: a.At}
		if a.Progress.Known() {
			row.Progress = fmt.Sprintf("%d/%d", a.Progress.Completed, a.Progress.Total)
		}
		row.Tokens = tokensOf(a.Usage)
		if i+1 < len(hist) {
			row.NextIn = max(hist[i+1].At.Sub(a.At.Add(a.Duration)), 0).Round(time.Millisecond).String()
		}
		out[i] = row
	}
	return out
}

// tokensOf shows an attempt's usage: "1200/300" tokens in/out, with
// " · $0.0045" when a cost was reported; "-" when nothing was.
func tokensOf(u retry.Usage) string {
	if u.IsZero() {
		return "-"
	}
	s := fmt.Sprintf("%d/%d", u.InputTokens, u.OutputTokens)
	if u.CostUSD != 0 {
		s += " · " + usd(u.CostUSD)
	}
	return s
}
