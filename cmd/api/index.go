package api

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/loop"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

// index keeps every request this process has seen on the attempts and
// outcomes streams (followed from their start), for GET /v1/requests and
// the console's in-flight list. It holds at most max requests: past it the
// oldest tenth is dropped, lists say truncated, and a warning is logged.
type index struct {
	max int
	log zerolog.Logger

	mu        sync.RWMutex
	byID      map[string]*entry
	truncated bool
	dropped   int
}

// entry is what the index knows of one request (about 200 bytes).
type entry struct {
	RequestStatus
	terminal bool
}

func newIndex(max int, log zerolog.Logger) *index {
	return &index{max: max, log: log, byID: map[string]*entry{}}
}

// follow feeds the index from both streams until ctx ends; ordered
// consumers recreate themselves across reconnects.
func (x *index) follow(ctx context.Context, js jetstream.JetStream, t wire.Topology) {
	var g loop.Group
	g.Start(ctx,
		func(ctx context.Context) {
			x.followOne(ctx, js, t.AttemptsStream, t.AttemptsPrefix+".>", x.applyAttempt)
		},
		func(ctx context.Context) {
			x.followOne(ctx, js, t.OutcomesStream, t.OutcomesPrefix+".>", x.applyRecord)
		})
	<-ctx.Done()
	g.Stop()
}

// followOne consumes one stream until ctx ends, waiting for it to exist.
func (x *index) followOne(ctx context.Context, js jetstream.JetStream, stream, subjects string, apply func([]byte)) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subjects}})
		if err == nil {
			cc, cerr := cons.Consume(func(m jetstream.Msg) { apply(m.Data()) })
			if cerr == nil {
				<-ctx.Done()
				cc.Stop()
				return
			}
			err = cerr
		}
		x.log.Debug().Err(err).Str("stream", stream).Msg("api: request index cannot follow the stream yet")
		if !loop.Sleep(ctx, wait) {
			return
		}
	}
}

func (x *index) applyAttempt(data []byte) {
	var ev schemas.AttemptEvent
	if json.Unmarshal(data, &ev) != nil || ev.RequestID == "" {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.entryFor(ev.RequestID, ev.Persona, ev.TaskID, ev.Step, ev.At)
	switch ev.Kind {
	case schemas.AttemptQueued:
		e.Deadline = ev.Deadline
		if !ev.CreatedAt.IsZero() {
			e.CreatedAt = ev.CreatedAt
		}
	case schemas.AttemptStarted:
		if !e.terminal && ev.Attempt >= e.Attempts {
			e.Status, e.Attempts, e.NextAttemptAt = statusRunning, ev.Attempt, time.Time{}
		}
	case schemas.AttemptFailed:
		if !e.terminal && ev.Attempt >= e.Attempts {
			e.Attempts, e.LastError = ev.Attempt, ev.Error
			if ev.NextAttempt > 0 {
				e.Status, e.NextAttemptAt = statusRetrying, ev.At.Add(time.Duration(ev.NextDelayMs)*time.Millisecond)
			}
		}
	}
}

// submitted enters a request this process just stored, so a list right
// after its submit has it (the queued event reaches the index through the
// attempts stream a moment later).
func (x *index) submitted(st RequestStatus) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.entryFor(st.RequestID, st.Persona, st.TaskID, st.Step, st.CreatedAt)
	if e.Deadline.IsZero() {
		e.Deadline = st.Deadline
	}
}

// recordFields is the part of a terminal record the index keeps (the
// output is not decoded).
type recordFields struct {
	RequestID   string    `json:"request_id"`
	TaskID      string    `json:"task_id"`
	Step        string    `json:"step"`
	Persona     string    `json:"persona"`
	Outcome     string    `json:"outcome"`
	Attempts    int       `json:"attempts"`
	LastError   string    `json:"last_error"`
	At          time.Time `json:"at"`
	SubmittedAt time.Time `json:"submitted_at"`
}

func (x *index) applyRecord(data []byte) {
	var rec recordFields
	if json.Unmarshal(data, &rec) != nil || rec.RequestID == "" {
		return
	}
	created := rec.SubmittedAt
	if created.IsZero() {
		created = rec.At
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.entryFor(rec.RequestID, rec.Persona, rec.TaskID, rec.Step, created)
	e.terminal, e.Status, e.Attempts, e.LastError, e.NextAttemptAt = true, rec.Outcome, rec.Attempts, rec.LastError, time.Time{}
	if !rec.SubmittedAt.IsZero() {
		e.CreatedAt = rec.SubmittedAt
	}
}

// entryFor returns the entry of id, made (as queued) when new. Called
// with mu held.
func (x *index) entryFor(id, persona, task, step string, created time.Time) *entry {
	if e, ok := x.byID[id]; ok {
		return e
	}
	e := &entry{RequestStatus: RequestStatus{RequestID: id, Persona: persona, TaskID: task, Step: step,
		Status: statusQueued, CreatedAt: created}}
	x.byID[id] = e
	if len(x.byID) > x.max {
		x.dropOldest()
	}
	return e
}

// dropOldest removes the oldest tenth of the index. Called with mu held.
func (x *index) dropOldest() {
	all := make([]*entry, 0, len(x.byID))
	for _, e := range x.byID {
		all = append(all, e)
	}
	slices.SortFunc(all, newestFirst)
	n := max(len(all)-x.max*9/10, 1)
	for _, e := range all[len(all)-n:] {
		delete(x.byID, e.RequestID)
	}
	x.truncated, x.dropped = true, x.dropped+n
	x.log.Warn().Int("dropped", n).Int("dropped_total", x.dropped).Int("index_size", x.max).
		Msg("api: request index full: dropped the oldest requests; request lists are truncated (raise api index_size)")
}

func newestFirst(a, b *entry) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return cmp.Compare(b.RequestID, a.RequestID)
}

// listQuery filters and pages a list.
type listQuery struct {
	task     string
	personas []string
	statuses []string
	limit    int
	after    *entry // cursor: entries strictly after this one in newest-first order
}

// list returns one page, whether there are more, and whether the index
// was truncated.
func (x *index) list(q listQuery) ([]RequestStatus, bool, bool) {
	// Entries change under the lock as the streams are followed: copy what
	// matches while holding it.
	x.mu.RLock()
	matched := make([]entry, 0, 64)
	for _, e := range x.byID {
		if q.matches(e) {
			matched = append(matched, *e)
		}
	}
	truncated := x.truncated
	x.mu.RUnlock()
	slices.SortFunc(matched, func(a, b entry) int { return newestFirst(&a, &b) })
	out := make([]RequestStatus, 0, min(q.limit, len(matched)))
	for _, e := range matched {
		if len(out) == q.limit {
			return out, true, truncated
		}
		out = append(out, e.RequestStatus)
	}
	return out, false, truncated
}

func (q *listQuery) matches(e *entry) bool {
	if q.task != "" && e.TaskID != q.task {
		return false
	}
	if len(q.personas) > 0 && !slices.Contains(q.personas, e.Persona) {
		return false
	}
	if len(q.statuses) > 0 && !slices.Contains(q.statuses, e.Status) {
		return false
	}
	return q.after == nil || newestFirst(q.after, e) < 0
}

// splitList reads a repeated, comma-separated query parameter.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
