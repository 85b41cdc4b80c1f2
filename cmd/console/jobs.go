package console

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/personaq/personaq/dlq"
)

// A job is a replay or a purge of a fixed list of records: planned (the dry
// run is shown), then run once on confirmation, its progress watched live.
// It acts on exactly the records its dry run listed.

type jobState string

const (
	jobPlanned  jobState = "planned"
	jobRunning  jobState = "running"
	jobFinished jobState = "finished"
)

// maxJobs bounds the jobs kept in memory (the oldest go first).
const maxJobs = 100

// maxJobErrors bounds the per-record errors a job keeps.
const maxJobErrors = 20

type job struct {
	ID      string
	Kind    string // "replay" or "purge"
	What    string // the selection, for people
	Seqs    []uint64
	Created time.Time
	Preview previewView

	mu      sync.Mutex
	st      jobStatus
	changed chan struct{}
}

// jobStatus is what the job page and its events show.
type jobStatus struct {
	State    jobState `json:"state"`
	Done     int      `json:"done"`
	Total    int      `json:"total"`
	Pct      int      `json:"pct"`
	OK       int      `json:"ok"`
	Dups     int      `json:"duplicates"`
	Failed   int      `json:"failed"`
	Errors   []string `json:"errors,omitempty"`
	Requests []string `json:"requests,omitempty"`
	Took     string   `json:"took,omitempty"`
}

func (j *job) status() (jobStatus, <-chan struct{}) {
	j.mu.Lock()
	defer j.mu.Unlock()
	st := j.st
	st.Errors, st.Requests = slices.Clone(st.Errors), slices.Clone(st.Requests)
	return st, j.changed
}

// update changes the status and wakes whoever watches it.
func (j *job) update(fn func(*jobStatus)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	fn(&j.st)
	j.st.Pct = pct(j.st.Done, j.st.Total)
	close(j.changed)
	j.changed = make(chan struct{})
}

type jobs struct {
	insp   *dlq.Inspector
	log    zerolog.Logger
	mu     sync.Mutex
	all    map[string]*job
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newJobs(insp *dlq.Inspector, log zerolog.Logger) *jobs {
	ctx, cancel := context.WithCancel(context.Background())
	return &jobs{insp: insp, log: log, all: map[string]*job{}, ctx: ctx, cancel: cancel}
}

func (js *jobs) add(j *job) {
	j.ID, j.changed, j.st = randomToken()[:12], make(chan struct{}), jobStatus{State: jobPlanned, Total: len(j.Seqs)}
	js.mu.Lock()
	defer js.mu.Unlock()
	if len(js.all) >= maxJobs {
		oldest := slices.MinFunc(slices.Collect(maps.Values(js.all)), func(a, b *job) int { return a.Created.Compare(b.Created) })
		delete(js.all, oldest.ID)
	}
	js.all[j.ID] = j
}

func (js *jobs) get(id string) *job {
	js.mu.Lock()
	defer js.mu.Unlock()
	return js.all[id]
}

// run starts a planned job once; false when it was started before.
func (js *jobs) run(j *job) bool {
	started := false
	j.update(func(st *jobStatus) {
		if st.State == jobPlanned {
			st.State, started = jobRunning, true
		}
	})
	if !started {
		return false
	}
	js.log.Info().Str("job", j.ID).Str("kind", j.Kind).Int("records", len(j.Seqs)).Str("selection", j.What).Msg("console: quarantine job started")
	js.wg.Add(1)
	go js.work(j)
	return true
}

func (js *jobs) work(j *job) {
	defer js.wg.Done()
	t0 := time.Now()
	for _, seq := range j.Seqs {
		if js.ctx.Err() != nil {
			break
		}
		res := js.one(j.Kind, seq)
		j.update(func(st *jobStatus) { res.apply(st) })
	}
	j.update(func(st *jobStatus) { st.State, st.Took = jobFinished, time.Since(t0).Round(time.Millisecond).String() })
	st, _ := j.status()
	js.log.Info().Str("job", j.ID).Str("kind", j.Kind).Int("ok", st.OK).Int("duplicates", st.Dups).Int("failed", st.Failed).Msg("console: quarantine job finished")
}

// oneResult is what happened to one record.
type oneResult struct {
	ok, dup bool
	err     string
	request string
}

func (r oneResult) apply(st *jobStatus) {
	st.Done++
	switch {
	case r.err != "":
		st.Failed++
		if len(st.Errors) < maxJobErrors {
			st.Errors = append(st.Errors, r.err)
		}
	case r.dup:
		st.Dups++
	case r.ok:
		st.OK++
	}
	if r.request != "" && len(st.Requests) < maxJobErrors {
		st.Requests = append(st.Requests, r.request)
	}
}

// one replays or purges one record; a record gone meanwhile is an error
// for that record only.
func (js *jobs) one(kind string, seq uint64) oneResult {
	sel := dlq.Selection{Seqs: []uint64{seq}}
	if kind == "purge" {
		rep, err := js.insp.Purge(js.ctx, sel, dlq.PurgeOptions{})
		switch {
		case err != nil:
			return oneResult{err: fmt.Sprintf("seq %d: %v", seq, err)}
		case rep.Failed > 0:
			return oneResult{err: rep.Errors[0]}
		}
		return oneResult{ok: true}
	}
	rep, err := js.insp.Replay(js.ctx, sel, dlq.ReplayOptions{})
	if err != nil {
		return oneResult{err: fmt.Sprintf("seq %d: %v", seq, err)}
	}
	it := rep.Items[0]
	if it.Err != "" {
		return oneResult{err: fmt.Sprintf("seq %d: %s", seq, it.Err)}
	}
	return oneResult{ok: true, dup: it.Duplicate, request: it.NewRequestID}
}

func (js *jobs) stop() {
	js.cancel()
	js.wg.Wait()
}
