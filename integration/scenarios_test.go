//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/integration/containers"
	"github.com/personaq/personaq/schemas"
)

// expectation is how every request of a demo persona must end.
type expectation struct {
	outcome  schemas.Outcome
	reason   schemas.Reason
	attempts int
}

var demoExpect = map[string]expectation{
	"echo":      {schemas.OutcomeSucceeded, "", 1},
	"flaky":     {schemas.OutcomeSucceeded, "", 3},
	"validator": {schemas.OutcomeSucceeded, "", 2},
	"terminal":  {schemas.OutcomeQuarantined, schemas.ReasonTerminal, 1},
	"slowpoke":  {schemas.OutcomeQuarantined, schemas.ReasonExhausted, 4},
	"plateau":   {schemas.OutcomeDeferred, schemas.ReasonDeferred, 4}, // confirmed by the fallback on attempt 4
}

// checkExpected asserts each request of a demo persona (or of the work
// persona: succeeded on attempt 1) ended as demoExpect says, with exactly
// that many attempts: none burned by infrastructure.
func (e *env) checkExpected(reqs []*schemas.PersonaRequest) {
	e.t.Helper()
	for _, r := range reqs {
		want, ok := demoExpect[r.Persona]
		if r.Persona == "work" {
			want, ok = expectation{schemas.OutcomeSucceeded, "", 1}, true
		}
		if !ok {
			continue
		}
		if want.outcome == schemas.OutcomeSucceeded {
			succ := e.obs.succeeded(r.RequestID)
			if assert.Len(e.t, succ, 1, "%s %s", r.Persona, r.RequestID) {
				assert.Equal(e.t, want.attempts, succ[0].Attempts, "%s %s attempts", r.Persona, r.RequestID)
			}
			continue
		}
		recs := e.obs.quarantined(r.RequestID)
		if assert.Len(e.t, recs, 1, "%s %s", r.Persona, r.RequestID) {
			assert.Equal(e.t, want.reason, recs[0].Reason, "%s %s reason", r.Persona, r.RequestID)
			assert.Equal(e.t, want.attempts, recs[0].Attempts, "%s %s attempts", r.Persona, r.RequestID)
		}
	}
}

// TestMixedWorkload runs every demo persona across three replicas: each
// request ends where its persona says, none lost, none quarantined twice.
func TestMixedWorkload(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	cfg := replicaConfig(echoPersona, flakyPersona, terminalPersona, slowpokePersona, plateauPersona, validatorPersona)
	e.startReplicas("mixed", 3, cfg)

	var reqs []*schemas.PersonaRequest
	for _, p := range []string{"echo", "flaky", "terminal", "slowpoke", "plateau", "validator"} {
		reqs = append(reqs, newRequests("mixed", p, 20, "")...)
	}
	e.publish(reqs...)
	tl := e.settle(reqs, 3*time.Minute)
	e.checkExpected(reqs)
	require.Equal(t, 60, tl.succeeded)
	require.Equal(t, map[string]int{"terminal": 20, "exhausted": 20, "deferred": 20}, tl.quarantined)

	// Every replica took part.
	var served []string
	for _, name := range []string{"mixed-1", "mixed-2", "mixed-3"} {
		n := e.countLog("Persona request succeeded", name)
		served = append(served, fmt.Sprintf("%s %d", name, n))
		assert.Positive(t, n, "%s ran no successful attempt", name)
	}
	record(t, start, tl, "3 replicas; successes per replica: "+fmt.Sprint(served))
}

// TestScaleOutAndIn adds a replica while slow work runs and stops another
// with SIGTERM: the new replica takes work at once, the stopped one drains
// its in-flight attempts and exits 0, no attempt is burned, nothing runs
// twice.
func TestScaleOutAndIn(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	a := e.startAgent()
	cfg := replicaConfig(workPersona(a.URL, 4), echoPersona)
	reps := e.startReplicas("scale", 2, cfg)

	// 150 s of work on 2 × 4 slots: about 19 s, enough to start a replica
	// (5–10 s here) and see it take work.
	reqs := append(newRequests("scale", "work", 150, `{"work_ms":1000}`), newRequests("scale", "echo", 20, "")...)
	e.publish(reqs...)

	// Scale out once work is running on both.
	e.waitFor("work running on both replicas", 30*time.Second, func() bool {
		return len(a.inflight("scale-1")) > 0 && len(a.inflight("scale-2")) > 0
	})
	e.replica("scale-3", cfg)
	// Scale in: SIGTERM scale-1 while it has attempts in flight.
	e.waitFor("scale-3 doing work", 30*time.Second, func() bool { return len(a.inflight("scale-3")) > 0 })
	inflight := len(a.inflight("scale-1"))
	stopStart := time.Now()
	require.NoError(t, reps[0].Stop(e.ctx))
	stopTook := time.Since(stopStart)
	code, err := reps[0].ExitCode(e.ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, code, "scale-1 exit code after SIGTERM")

	tl := e.settle(reqs, 3*time.Minute)
	e.checkExpected(reqs)
	require.Equal(t, len(reqs), tl.succeeded)
	assert.Empty(t, a.overlaps(), "invariant 3: a request ran on two live replicas at once")
	calls := a.callsFrom()
	assert.Positive(t, calls["scale-3"], "the added replica did no work")
	assert.Zero(t, e.countLog("attempt interrupted by shutdown", "scale-1"), "drain cut an attempt short")
	record(t, start, tl, fmt.Sprintf("2 replicas, +1 mid-run, 1 stopped by SIGTERM with %d attempts in flight (drained in %s, exit %d); work calls per replica %v",
		inflight, stopTook.Round(100*time.Millisecond), code, calls))
}

// TestKillReplicaMidHandler SIGKILLs a replica while it runs slow attempts:
// its messages come back after the ack wait (3s) and finish on the other
// replicas; nothing is lost, nothing runs twice on live replicas.
func TestKillReplicaMidHandler(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	a := e.startAgent()
	cfg := replicaConfig(workPersona(a.URL, 4))
	reps := e.startReplicas("kill", 3, cfg)

	reqs := newRequests("kill", "work", 60, `{"work_ms":1500}`)
	e.publish(reqs...)

	e.waitFor("kill-1 busy: 4 attempts done, 4 in flight", 30*time.Second, func() bool {
		return a.callsFrom()["kill-1"] >= 4 && len(a.inflight("kill-1")) >= 4
	})
	victims := a.inflight("kill-1")
	ip, err := reps[0].IP(e.ctx, e.net)
	require.NoError(t, err)
	a.markDead(ip)
	killedAt := time.Now()
	require.NoError(t, reps[0].Kill(e.ctx))
	code, err := reps[0].ExitCode(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 137, code, "SIGKILL exit code")

	tl := e.settle(reqs, 3*time.Minute)
	require.Equal(t, len(reqs), tl.succeeded)
	assert.Empty(t, a.overlaps(), "invariant 3: a request ran on two live replicas at once")

	// Each victim finished on another replica; the attempt the kill cut
	// short is counted as lost by the ledger (it may have had effects).
	var failover time.Duration
	var reruns []string // per victim: its stream sequence, where and how long after the kill it ran again
	calls := a.snapshot()
	for _, v := range victims {
		var done *call
		for i := range calls {
			c := &calls[i]
			if c.RequestID == v.RequestID && c.Start.After(killedAt) && c.Status == 200 {
				done = c
				break
			}
		}
		if assert.NotNil(t, done, "victim %s never ran again", v.RequestID) {
			assert.NotEqual(t, "kill-1", done.From)
			failover = max(failover, done.Start.Sub(killedAt))
			reruns = append(reruns, fmt.Sprintf("%s on %s after %s", v.RequestID, done.From, done.Start.Sub(killedAt).Round(10*time.Millisecond)))
		}
		ev := e.obs.succeeded(v.RequestID)
		if assert.Len(t, ev, 1) {
			assert.Equal(t, 2, ev[0].Attempts, "victim %s: the killed attempt counts as lost, the rerun is attempt 2", v.RequestID)
		}
	}
	// A victim is redelivered once its AckWait runs out (3s after the
	// kill's last heartbeat). When the engine tears the killed container's
	// network down without a reset, the server keeps the dead replica's
	// pull requests until they expire and may hand that redelivery to one
	// of them: the next AckWait then brings it to a live replica. So the
	// bound is two AckWaits and a second, not one.
	assert.Less(t, failover, 2*3*time.Second+time.Second, "failover slower than 2 × AckWait + 1s: %v", reruns)
	record(t, start, tl, fmt.Sprintf("3 replicas, kill-1 SIGKILLed (exit %d) with %d attempts in flight; all %d rerun on kill-2/kill-3, slowest %s after the kill (AckWait 3s); work calls per replica %v",
		code, len(victims), len(victims), failover.Round(100*time.Millisecond), a.callsFrom()))
}

// TestNATSRestart SIGKILLs the NATS container mid-run and starts it again
// on the same volume: JetStream recovers streams, consumers and messages
// (file storage, sync_interval always), replicas and the host reconnect,
// and every request still ends exactly once with no attempt burned.
func TestNATSRestart(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	a := e.startAgent()
	cfg := replicaConfig(workPersona(a.URL, 4), echoPersona, flakyPersona)
	e.startReplicas("natsrestart", 2, cfg)

	first := append(newRequests("before", "work", 40, `{"work_ms":500}`), newRequests("before", "echo", 30, "")...)
	first = append(first, newRequests("before", "flaky", 20, "")...)
	second := append(newRequests("after", "work", 20, `{"work_ms":500}`), newRequests("after", "echo", 20, "")...)
	e.publish(first...)
	e.waitFor("a quarter of the first batch settled", time.Minute, func() bool {
		_ = e.obs.poll(e.ctx)
		return e.obs.settledCount(first) >= len(first)/4
	})
	settledBefore := e.obs.settledCount(first)
	deliveredBefore := e.deliveries()
	downAt := time.Now()
	require.NoError(t, e.nats.Kill(e.ctx))
	time.Sleep(3 * time.Second)
	require.NoError(t, e.nats.Start(e.ctx))
	down := time.Since(downAt)
	deliveredAfter := e.deliveries()
	e.publish(second...)

	reqs := append(first, second...)
	tl := e.settle(reqs, 3*time.Minute)
	e.checkExpected(reqs)
	require.Equal(t, len(reqs), tl.succeeded)
	assert.Empty(t, a.overlaps(), "invariant 3: a request ran on two live replicas at once")
	// The consumers' delivered counters are not fsynced with every delivery
	// (sync_interval covers stream writes): a SIGKILL can roll them back,
	// which makes the deliveries column a lower bound here.
	rollback := ""
	if deliveredAfter < deliveredBefore {
		rollback = fmt.Sprintf("; the consumers' delivered counters went back from %d to %d across the SIGKILL (deliveries is a lower bound)", deliveredBefore, deliveredAfter)
	}
	record(t, start, tl, fmt.Sprintf("2 replicas; NATS SIGKILLed with %d of %d settled, back after %s (same volume); %d more published after; %d acks unconfirmed, %d redeliveries of completed steps acked without rerunning%s",
		settledBefore, len(first), down.Round(100*time.Millisecond), len(second),
		e.countLog("ack not confirmed"), e.countLog("duplicate delivery of a completed step"), rollback))
}

// TestRedisOutage stops Redis (the attempt ledger) for 45s mid-run. A
// ledger call to the stopped server's address waits out go-redis's dial
// timeouts and retries (about 35s here) before it fails, so the outage is
// long enough for both behaviours: first every worker waits in the ledger
// call, then the calls fail, replicas hold the messages they have (no
// attempt counted, nothing released) and pull no more. Meanwhile /readyz says not ready. Afterwards everything
// finishes and every request took exactly its persona's attempts.
func TestRedisOutage(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	a := e.startAgent()
	cfg := replicaConfig(workPersona(a.URL, 4), echoPersona, flakyPersona)
	reps := e.startReplicas("redisdown", 2, cfg)

	reqs := append(newRequests("redis", "work", 60, `{"work_ms":500}`), newRequests("redis", "echo", 40, "")...)
	reqs = append(reqs, newRequests("redis", "flaky", 20, "")...)
	e.publish(reqs...)
	e.waitFor("a quarter settled", time.Minute, func() bool {
		_ = e.obs.poll(e.ctx)
		return e.obs.settledCount(reqs) >= len(reqs)/4
	})
	for _, r := range reps {
		assert.Equal(t, 200, e.readyz(r).code, "%s /readyz before the outage", r.Alias())
	}
	settledBefore := e.obs.settledCount(reqs)
	downAt := time.Now()
	require.NoError(t, e.redis.Stop(e.ctx))
	notReady := map[string]string{}
	e.waitFor("every replica reporting not ready", 10*time.Second, func() bool {
		for _, r := range reps {
			if p := e.readyz(r); p.code == 503 {
				notReady[r.Alias()] = p.body
			}
		}
		return len(notReady) == len(reps)
	})
	for name, body := range notReady {
		assert.Contains(t, body, "ledger", "%s /readyz during the outage", name)
	}
	time.Sleep(time.Until(downAt.Add(45 * time.Second)))
	require.NoError(t, e.redis.Start(e.ctx))
	down := time.Since(downAt)
	e.waitFor("every replica ready again", 20*time.Second, func() bool {
		for _, r := range reps {
			if e.readyz(r).code != 200 {
				return false
			}
		}
		return true
	})

	tl := e.settle(reqs, 3*time.Minute)
	e.checkExpected(reqs)
	require.Equal(t, len(reqs), tl.succeeded)
	assert.Empty(t, a.overlaps(), "invariant 3: a request ran on two live replicas at once")
	// The one policy: the pull stops. A delivery taken just before the
	// outage was noticed is held (heartbeated) rather than released; whether
	// any is depends on timing, so held is reported, not required.
	stopped := e.countLog("attempt ledger unreachable; pulling nothing until it is back")
	held := e.countLog("attempt ledger unreachable; request held")
	unrecorded := e.countLog("ledger did not record the attempt")
	// A start Redis ran but did not answer before it stopped: the held
	// delivery resumes that attempt (checkExpected holds either way).
	resumed := e.countLog("its attempt, which never ran, is resumed")
	assert.Positive(t, stopped, "no replica stopped pulling for the outage")
	assert.Zero(t, e.countLog("ledger call failed; message released"), "a replica released a message because of the outage")
	record(t, start, tl, fmt.Sprintf("2 replicas; Redis stopped with %d of %d settled, back after %s (AOF on a volume); /readyz 503 %q on both during it, 200 after; %d held-request warnings (rate-limited; nothing released), %d attempts not recorded (counted on redelivery) while down, %d unanswered starts resumed",
		settledBefore, len(reqs), down.Round(100*time.Millisecond), notReady["redisdown-1"], held, unrecorded, resumed))
}

// probe is one answer of a replica's probe endpoint.
type probe struct {
	code int
	body string
}

// readyz asks r's /readyz (code 0: no answer).
func (e *env) readyz(r *containers.Replica) probe {
	base, err := r.ProbeURL(e.ctx)
	if err != nil {
		return probe{body: err.Error()}
	}
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return probe{body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return probe{code: resp.StatusCode, body: strings.TrimSpace(string(b))}
}

// TestRepeatedKillsOfBusyReplica SIGKILLs a replica running 64 attempts at
// once ten times (and restarts it each time), so some kills land between
// an attempt's success and its ack. Every request must still end exactly
// once with its succeeded outcome event. Before ff26363 a kill after the
// ledger recorded a success but before the outcome event left the process
// lost the event for good (the redelivery was acked as a duplicate without
// publishing it): about 1 in 150 requests here.
//
// The persona may make more attempts than there are kills: an attempt cut
// by a kill counts (its worker was lost), and a request whose redeliveries
// the kills kept catching (18 of 3,000 in one run, when the restarts took
// about as long as the ack wait) was rightly quarantined as exhausted,
// which is not what this test is about.
func TestRepeatedKillsOfBusyReplica(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	cfg := replicaConfig(`  echo:
    invoker: {type: demo, demo: echo}
    timeout: 2s
    ack_wait: 2s
    concurrency: 64
    policy: {preset: persona, max_attempts: 12, schedule: {type: fixed, every: 200ms}}
`)
	reps := e.startReplicas("busy", 1, cfg)
	reqs := newRequests("busy", "echo", 3000, "")
	e.publish(reqs...)
	for range 10 {
		time.Sleep(700 * time.Millisecond)
		require.NoError(t, reps[0].Kill(e.ctx))
		require.NoError(t, reps[0].Start(e.ctx))
	}
	tl := e.settle(reqs, 3*time.Minute)
	require.Equal(t, len(reqs), tl.succeeded)
	record(t, start, tl, fmt.Sprintf("1 replica, 64 slots, SIGKILLed and restarted 10 times; %d redeliveries of completed steps acked without rerunning (outcome republished, deduplicated)",
		e.countLog("duplicate delivery of a completed step")))
}
