//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/cli"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/integration/containers"
	"github.com/personaq/personaq/schemas"
)

// TestCrashLoopQuarantined publishes a request whose persona takes its
// replica down every time (the agent SIGKILLs the caller; a supervisor
// restarts it, like a restart policy). The broker's MaxDeliver (3) bounds
// it: the replica that gets the last delivery does not run it but stores
// its quarantine record with reason max_deliveries — exactly one record —
// and terms it, so it crashes no replica a third time; everything else
// still succeeds.
func TestCrashLoopQuarantined(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	a := e.startAgent()
	cfg := replicaConfig(crashPersona(a.URL), echoPersona)
	e.startReplicas("crashloop", 2, cfg)

	var restarts atomic.Int32
	var supervisor sync.WaitGroup
	a.onCrash = func(r *containers.Replica) {
		supervisor.Go(func() {
			time.Sleep(500 * time.Millisecond)
			if err := r.Start(e.ctx); err != nil {
				t.Errorf("supervisor: restart %s: %v", r.Alias(), err)
				return
			}
			restarts.Add(1)
		})
	}
	poison := newRequests("crashloop", "crash", 1, "")
	reqs := append(newRequests("crashloop", "echo", 40, ""), poison...)
	e.publish(reqs...)

	tl := e.settle(reqs, 3*time.Minute)
	supervisor.Wait()
	require.Equal(t, 40, tl.succeeded)
	require.Equal(t, map[string]int{"max_deliveries": 1}, tl.quarantined)
	recs := e.obs.quarantined(poison[0].RequestID)
	require.Len(t, recs, 1)
	rec := recs[0]
	assert.Equal(t, schemas.ReasonMaxDeliveries, rec.Reason)
	assert.EqualValues(t, 3, rec.Deliveries, "deliveries in the record")
	assert.Equal(t, "crash", rec.Persona)
	assert.Equal(t, topo.RequestSubject("crash"), rec.OriginalSubject)
	got, err := schemas.DecodeRequest(rec.Payload)
	if assert.NoError(t, err, "record payload") {
		assert.Equal(t, poison[0].RequestID, got.RequestID, "the record keeps the original payload")
	}
	crashes := 0
	for _, c := range a.snapshot() {
		if c.Path == "/crash" {
			crashes++
		}
	}
	assert.Equal(t, 2, crashes, "the poison request ran once per delivery but the last (MaxDeliver 3)")
	record(t, start, tl, fmt.Sprintf("2 replicas; the poison request killed its replica %d times (%d restarts by the test's supervisor); record: deliveries %d, attempts %d (from the ledger), %d error(s)",
		crashes, restarts.Load(), rec.Deliveries, rec.Attempts, len(rec.Errors)))
}

// TestQuarantineCLI quarantines requests a broken agent rejects, inspects
// them with `personaq quarantine ls/stats -o json` (in process, against the
// NATS container's mapped port, and once as a one-shot container on the
// network), fixes the agent and replays them with `quarantine replay --all
// --yes`: each replay runs under a new request id, succeeds, and its record
// leaves the quarantine.
func TestQuarantineCLI(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	a := e.startAgent()
	cfg := replicaConfig(fixablePersona(a.URL), echoPersona)
	e.startReplicas("qcli", 2, cfg)

	broken := newRequests("qcli", "fixable", 12, "")
	reqs := append(newRequests("qcli", "echo", 12, ""), broken...)
	e.publish(reqs...)
	tl := e.settle(reqs, 2*time.Minute)
	require.Equal(t, 12, tl.succeeded)
	require.Equal(t, map[string]int{"terminal": 12}, tl.quarantined)

	// ls -o json lists exactly the 12 records, one per request.
	var entries []dlq.Entry
	out := e.cli(0, "quarantine", "ls", "-o", "json", "--limit", "0", "--persona", "fixable")
	require.NoError(t, json.Unmarshal([]byte(out), &entries), out)
	require.Len(t, entries, 12)
	want := map[string]bool{}
	for _, r := range broken {
		want[r.RequestID] = true
	}
	for _, en := range entries {
		require.NotNil(t, en.Record, "entry %d: %s", en.Seq, en.Err)
		assert.Equal(t, schemas.ReasonTerminal, en.Record.Reason)
		assert.True(t, want[en.Record.RequestID], "unexpected record for %s", en.Record.RequestID)
		delete(want, en.Record.RequestID)
	}
	assert.Empty(t, want, "requests missing from quarantine ls")

	var stats dlq.Stats
	require.NoError(t, json.Unmarshal([]byte(e.cli(0, "quarantine", "stats", "-o", "json")), &stats))
	assert.EqualValues(t, 12, stats.Total)
	assert.EqualValues(t, 12, stats.ByReason["terminal"])

	// The same inspection from inside the network, as an operator's pod would.
	res, err := containers.RunCLI(e.ctx, containers.CLIOptions{
		Image: suite.images.Personaq, Network: e.net, Env: map[string]string{"NATS_URL": e.nats.InternalURL()},
	}, "quarantine", "ls", "--reason", "terminal")
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, res.Output)
	assert.Equal(t, 12, strings.Count(res.Output, " terminal "), res.Output)

	// Fix the agent, replay everything that was terminal.
	a.fix()
	var rep dlq.ReplayReport
	out = e.cli(0, "quarantine", "replay", "--all", "--reason", "terminal", "--yes", "-o", "json")
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Equal(t, 12, rep.Replayed, out)
	require.Equal(t, 12, rep.Removed, out)
	replays := make([]*schemas.PersonaRequest, 0, len(rep.Items))
	for _, it := range rep.Items {
		require.NotEmpty(t, it.NewRequestID, "replay of seq %d", it.Seq)
		r := *findRequest(broken, it.RequestID)
		r.RequestID = it.NewRequestID
		replays = append(replays, &r)
	}
	rtl := e.settle(replays, 2*time.Minute)
	require.Equal(t, 12, rtl.succeeded, "replayed requests succeed once the agent is fixed")
	for _, r := range replays {
		assert.Equal(t, 1, e.obs.succeeded(r.RequestID)[0].Attempts, "a replay counts attempts from one")
	}
	out = e.cli(0, "quarantine", "ls", "-o", "json", "--limit", "0")
	require.NoError(t, json.Unmarshal([]byte(out), &entries), out)
	assert.Empty(t, entries, "replayed records are removed from the quarantine")

	// Replaying a removed record again publishes nothing.
	out = e.cli(1, "quarantine", "replay", fmt.Sprint(rep.Items[0].Seq), "-o", "json")
	total := tl
	total.published += rtl.published
	total.succeeded += rtl.succeeded
	total.attempts += rtl.attempts
	total.deliveries = rtl.deliveries
	record(t, start, total, fmt.Sprintf("2 replicas; quarantine ls/stats -o json listed 12/12 terminal records (also as a one-shot container); replay --all --yes republished 12 as <id>-r1, all succeeded on attempt 1, 12 records removed; replaying a removed seq again exits 1 (%s)",
		strings.TrimSpace(lastLine(out))))
}

// cli runs `personaq ARGS… --nats-url <NATS container>` in process and
// requires exit code want; it returns stdout.
func (e *env) cli(want int, args ...string) string {
	e.t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	args = append(args, "--nats-url", e.nats.URL())
	code := cli.Run(ctx, args, &stdout, &stderr)
	require.Equal(e.t, want, code, "personaq %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), stdout.String(), stderr.String())
	if want != 0 {
		return stdout.String() + stderr.String()
	}
	return stdout.String()
}

func findRequest(reqs []*schemas.PersonaRequest, id string) *schemas.PersonaRequest {
	for _, r := range reqs {
		if r.RequestID == id {
			return r
		}
	}
	panic("no request " + id)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
