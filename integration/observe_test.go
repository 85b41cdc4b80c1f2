//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

// topo is the default topology the replicas' configs use.
var topo = wire.Topology{}.WithDefaults()

// observer reads the outcome and quarantine streams from the host, the
// way an operator's tooling would: by stream sequence, so nothing is missed
// and a NATS restart only delays it.
type observer struct {
	js jetstream.JetStream

	mu       sync.Mutex
	next     map[string]uint64
	outcomes map[string][]*schemas.OutcomeEvent     // by request id
	records  map[string][]*schemas.QuarantineRecord // by request id (or record id without one)
}

func newObserver(js jetstream.JetStream) *observer {
	return &observer{
		js: js, next: map[string]uint64{topo.OutcomesStream: 1, topo.QuarantineStream: 1},
		outcomes: map[string][]*schemas.OutcomeEvent{}, records: map[string][]*schemas.QuarantineRecord{},
	}
}

// poll reads every message stored since the last poll.
func (o *observer) poll(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, name := range []string{topo.OutcomesStream, topo.QuarantineStream} {
		s, err := o.js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		for seq := o.next[name]; seq <= info.State.LastSeq; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				o.next[name] = seq + 1
				continue
			}
			if err != nil {
				return err
			}
			if err := o.add(name, m.Data); err != nil {
				return fmt.Errorf("%s seq %d: %w", name, seq, err)
			}
			o.next[name] = seq + 1
		}
	}
	return nil
}

func (o *observer) add(stream string, data []byte) error {
	if stream == topo.OutcomesStream {
		ev, err := schemas.DecodeOutcome(data)
		if err != nil {
			return err
		}
		o.outcomes[ev.RequestID] = append(o.outcomes[ev.RequestID], ev)
		return nil
	}
	rec, err := schemas.DecodeQuarantineRecord(data)
	if err != nil {
		return err
	}
	key := rec.RequestID
	if key == "" {
		key = rec.ID
	}
	o.records[key] = append(o.records[key], rec)
	return nil
}

// succeeded returns id's succeeded outcome events.
func (o *observer) succeeded(id string) []*schemas.OutcomeEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*schemas.OutcomeEvent
	for _, ev := range o.outcomes[id] {
		if ev.Outcome == schemas.OutcomeSucceeded {
			out = append(out, ev)
		}
	}
	return out
}

// quarantined returns id's quarantine records.
func (o *observer) quarantined(id string) []*schemas.QuarantineRecord {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.records[id])
}

// outcome returns id's last outcome event (nil if none).
func (o *observer) outcome(id string) *schemas.OutcomeEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	evs := o.outcomes[id]
	if len(evs) == 0 {
		return nil
	}
	return evs[len(evs)-1]
}

// settledCount is how many of reqs have reached a terminal place.
func (o *observer) settledCount(reqs []*schemas.PersonaRequest) int {
	n := 0
	for _, r := range reqs {
		if len(o.succeeded(r.RequestID)) > 0 || len(o.quarantined(r.RequestID)) > 0 {
			n++
		}
	}
	return n
}

// tally counts where one scenario's requests ended.
type tally struct {
	published   int
	succeeded   int
	quarantined map[string]int // by reason
	attempts    int            // handler attempts of all requests (outcome events and records)
	deliveries  int            // JetStream deliveries, all persona consumers
}

// redelivered counts deliveries after the first of each request: retries
// the policy asked for plus redeliveries infrastructure caused.
func (t tally) redelivered() int { return t.deliveries - t.published }

// infraRedeliveries counts deliveries that ran no counted attempt: a
// replica killed or stopped mid-attempt, an ack lost in a NATS restart, a
// message released while Redis was down.
func (t tally) infraRedeliveries() int { return t.deliveries - t.attempts }

func (t tally) reasons() string {
	if len(t.quarantined) == 0 {
		return "0"
	}
	var parts []string
	total := 0
	for _, r := range sortedKeys(t.quarantined) {
		parts = append(parts, fmt.Sprintf("%s %d", r, t.quarantined[r]))
		total += t.quarantined[r]
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}

// infra renders infraRedeliveries, or n/a when the broker's delivery
// counters went backwards (a NATS crash) and the difference means nothing.
func (t tally) infra() string {
	if t.infraRedeliveries() < 0 {
		return "n/a"
	}
	return fmt.Sprint(t.infraRedeliveries())
}

func (t tally) String() string {
	return fmt.Sprintf("published %d, succeeded %d, quarantined %s, attempts %d, deliveries %d (redelivered %d, of which not a counted attempt %s)",
		t.published, t.succeeded, t.reasons(), t.attempts, t.deliveries, t.redelivered(), t.infra())
}

// settle waits until every request has reached a terminal place, then
// checks on all of them — each ended exactly once:
// acked with a succeeded outcome event, or as one record on the quarantine
// stream; none lost, none in two places, none quarantined twice — and that
// the requests stream and its consumers hold nothing more. It returns the
// tally.
func (e *env) settle(reqs []*schemas.PersonaRequest, timeout time.Duration) tally {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	last, lastChange := -1, time.Now()
	for {
		if err := e.obs.poll(e.ctx); err != nil {
			e.t.Logf("observer: %v (retrying)", err)
		}
		n := e.obs.settledCount(reqs)
		if n == len(reqs) {
			break
		}
		if n != last {
			last, lastChange = n, time.Now()
		}
		if time.Since(lastChange) > 15*time.Second {
			// Stalled: if the work queue is empty and the ledger holds a
			// success for every request left, nothing is running any more —
			// those requests were acked as succeeded without an outcome
			// event. Say so now rather than at the deadline.
			if msg := e.silentSuccesses(reqs); msg != "" {
				e.t.Fatal(msg)
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("invariant 1: %d of %d requests never reached a terminal place within %s (no progress for %s):\n%s",
				len(reqs)-n, len(reqs), timeout, time.Since(lastChange).Round(time.Second), e.unsettled(reqs))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A duplicate would come after the first: give it time to show.
	time.Sleep(1500 * time.Millisecond)
	require.NoError(e.t, e.obs.poll(e.ctx))
	e.waitDrained(15 * time.Second)
	require.NoError(e.t, e.obs.poll(e.ctx))

	tl := tally{published: len(reqs), quarantined: map[string]int{}}
	var bad []string
	for _, r := range reqs {
		succ, recs := e.obs.succeeded(r.RequestID), e.obs.quarantined(r.RequestID)
		switch {
		case len(succ) > 0 && len(recs) > 0:
			bad = append(bad, fmt.Sprintf("%s (%s): succeeded AND quarantined (%s)", r.RequestID, r.Persona, recs[0].Reason))
		case len(recs) > 1:
			bad = append(bad, fmt.Sprintf("%s (%s): %d quarantine records (duplicated): %s", r.RequestID, r.Persona, len(recs), recordIDs(recs)))
		case len(succ) > 1:
			bad = append(bad, fmt.Sprintf("%s (%s): %d succeeded outcome events", r.RequestID, r.Persona, len(succ)))
		case len(succ) == 1:
			tl.succeeded++
			tl.attempts += succ[0].Attempts
		case len(recs) == 1:
			tl.quarantined[string(recs[0].Reason)]++
			tl.attempts += recs[0].Attempts
		}
	}
	require.Empty(e.t, bad, "invariant 1 violated")
	tl.deliveries = e.deliveries()
	return tl
}

func recordIDs(recs []*schemas.QuarantineRecord) string {
	var ids []string
	for _, r := range recs {
		ids = append(ids, fmt.Sprintf("%s@%s", r.ID, r.Reason))
	}
	return strings.Join(ids, ", ")
}

// silentSuccesses returns a failure message when the requests stream is
// drained and every request without a terminal place has a success marker
// in the ledger: acked as succeeded, but no succeeded outcome event was
// ever published for it (fixed in ff26363; TestRepeatedKillsOfBusyReplica
// guards it). Empty otherwise.
func (e *env) silentSuccesses(reqs []*schemas.PersonaRequest) string {
	if ok, _ := e.drained(); !ok {
		return ""
	}
	var silent []string
	for _, r := range reqs {
		if len(e.obs.succeeded(r.RequestID)) > 0 || len(e.obs.quarantined(r.RequestID)) > 0 {
			continue
		}
		_, st, err := e.ledger().History(e.ctx, stepKey(r))
		if err != nil || !st.Done {
			return ""
		}
		silent = append(silent, fmt.Sprintf("%s (%s, task %s, ledger attempts %d)", r.RequestID, r.Persona, r.TaskID, st.Attempts))
	}
	if len(silent) == 0 {
		return ""
	}
	return fmt.Sprintf("invariant 1: %d request(s) were acked as succeeded (ledger success marker set, work queue empty) "+
		"but no succeeded outcome event was ever published — a replica died between recording the success and publishing "+
		"the event, and the redelivery was acked as a duplicate without publishing it:\n  %s", len(silent), strings.Join(silent, "\n  "))
}

// unsettled describes the requests without a terminal place: what the
// outcome stream, the ledger and the broker know of each.
func (e *env) unsettled(reqs []*schemas.PersonaRequest) string {
	var b strings.Builder
	shown := 0
	for _, r := range reqs {
		if len(e.obs.succeeded(r.RequestID)) > 0 || len(e.obs.quarantined(r.RequestID)) > 0 {
			continue
		}
		if shown++; shown > 15 {
			fmt.Fprintf(&b, "  …\n")
			break
		}
		fmt.Fprintf(&b, "  %s persona=%s task=%s last outcome=%v ledger=%s\n", r.RequestID, r.Persona, r.TaskID,
			describeOutcome(e.obs.outcome(r.RequestID)), e.ledgerState(r))
	}
	fmt.Fprintf(&b, "broker: %s", e.brokerState())
	return b.String()
}

func describeOutcome(ev *schemas.OutcomeEvent) string {
	if ev == nil {
		return "none"
	}
	return fmt.Sprintf("%s/%s after %d", ev.Outcome, ev.Reason, ev.Attempts)
}

// ledgerState summarises r's attempt ledger entry in Redis.
func (e *env) ledgerState(r *schemas.PersonaRequest) string {
	hist, st, err := e.ledger().History(e.ctx, stepKey(r))
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("attempts=%d inflight=%d done=%v history=%d", st.Attempts, st.InFlight, st.Done, len(hist))
}

func (e *env) ledger() *ledger.Ledger {
	l, err := ledger.New(ledger.Config{Client: e.rdb})
	require.NoError(e.t, err)
	return l
}

// stepKey mirrors consumers' ledger key: one entry per request of a task
// step (consumers/ledger.go).
func stepKey(r *schemas.PersonaRequest) ledger.StepKey {
	return ledger.StepKey{TaskID: r.TaskID, Step: r.Step + "@" + r.RequestID}
}

// brokerState describes the requests stream and its consumers.
func (e *env) brokerState() string {
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, topo.RequestsStream)
	if err != nil {
		return err.Error()
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s msgs=%d", topo.RequestsStream, info.State.Msgs)
	lister := s.ListConsumers(ctx)
	for ci := range lister.Info() {
		fmt.Fprintf(&b, "; %s pending=%d ack_pending=%d redelivered=%d delivered=%d",
			ci.Name, ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.Delivered.Consumer)
	}
	return b.String()
}

// waitDrained waits until the requests stream is empty and no consumer has
// anything pending: every request was acked or termed.
func (e *env) waitDrained(timeout time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := e.drained()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("requests not drained %s after every request settled: %s", timeout, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (e *env) drained() (bool, string) {
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, topo.RequestsStream)
	if err != nil {
		return false, err.Error()
	}
	info, err := s.Info(ctx)
	if err != nil {
		return false, err.Error()
	}
	ok := info.State.Msgs == 0
	lister := s.ListConsumers(ctx)
	for ci := range lister.Info() {
		ok = ok && ci.NumPending == 0 && ci.NumAckPending == 0
	}
	if err := lister.Err(); err != nil {
		return false, err.Error()
	}
	return ok, e.brokerState()
}

// deliveries sums every persona consumer's deliveries so far.
func (e *env) deliveries() int {
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, topo.RequestsStream)
	require.NoError(e.t, err)
	n := 0
	lister := s.ListConsumers(ctx)
	for ci := range lister.Info() {
		n += int(ci.Delivered.Consumer)
	}
	require.NoError(e.t, lister.Err())
	return n
}

// publish publishes reqs, retrying each (same request id, so the stream
// deduplicates) while NATS is unavailable.
func (e *env) publish(reqs ...*schemas.PersonaRequest) {
	e.t.Helper()
	for _, r := range reqs {
		deadline := time.Now().Add(90 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
			_, err := wire.PublishRequest(ctx, e.js, wire.Topology{}, r)
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				e.t.Fatalf("publish %s: %v", r.RequestID, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// newRequests builds n requests for persona with task ids <prefix>-<persona>-<i>.
func newRequests(prefix, persona string, n int, input string) []*schemas.PersonaRequest {
	out := make([]*schemas.PersonaRequest, n)
	for i := range n {
		r := schemas.NewRequest(fmt.Sprintf("%s-%s-%d", prefix, persona, i+1), "main", persona)
		r.Agents = schemas.Agents{Primary: "agent-a"}
		if persona == "plateau" {
			r.Agents.Fallback, r.ProgressTotal = "agent-b", 9
		}
		if input != "" {
			r.Input = []byte(input)
		}
		out[i] = r
	}
	return out
}
