package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/cli"
	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

// qrun runs the CLI in process against url.
func qrun(t *testing.T, url string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := cli.Run(c, append([]string{"--log-format", "json", "--nats-url", url}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// quarantineEnv is a server with personaq's streams and records: one per
// reason for persona "tester" (task t-<reason>), then two terminal
// records for "planner" (tasks p1, p2).
type quarantineEnv struct {
	url  string
	seqs map[string]uint64
	n    *testenv.NATS
}

func newQuarantineEnv(t *testing.T) *quarantineEnv {
	t.Helper()
	n := testenv.StartNATS(t)
	js := n.JetStream(t)
	c := context.Background()
	topo := wire.Topology{}.WithDefaults()
	require.NoError(t, consumers.Provision(c, js, topo, nil))
	w := dlq.NewWriter(js, topo.QuarantineSubject)
	env := &quarantineEnv{url: n.URL(), seqs: map[string]uint64{}, n: n}
	put := func(reason schemas.Reason, persona, task string, seq uint64) {
		req := schemas.NewRequest(task, "main", persona)
		payload, err := schemas.Encode(req)
		require.NoError(t, err)
		now := time.Now().UTC()
		rec := &schemas.QuarantineRecord{
			SchemaVersion: schemas.Version, ID: dlq.RecordID(topo.RequestsStream, seq), Reason: reason,
			Detail: fmt.Sprintf("%s: all attempts failed", reason), OriginalSubject: topo.RequestSubject(persona),
			Payload: payload, Stream: topo.RequestsStream, Sequence: seq, Attempts: 2,
			Errors: []schemas.AttemptRecord{
				{Attempt: 1, Agent: "agent-a", Class: "retryable", Error: "upstream 503", DurationMs: 12, At: now.Add(-1500 * time.Millisecond)},
				{Attempt: 2, Agent: "agent-a", Class: "terminal", ErrorType: "BadRequestError", Error: "schema mismatch in answer for " + task, DurationMs: 20, At: now},
			},
			RequestID: req.RequestID, TaskID: task, Step: "main", Persona: persona, QuarantinedAt: now,
			Headers: map[string][]string{"Nats-Msg-Id": {req.RequestID}},
		}
		qseq, _, err := w.Put(c, rec)
		require.NoError(t, err)
		env.seqs[task] = qseq
	}
	for i, r := range schemas.Reasons {
		put(r, "tester", "t-"+string(r), uint64(i+1))
	}
	put(schemas.ReasonTerminal, "planner", "p1", 100)
	put(schemas.ReasonTerminal, "planner", "p2", 101)
	return env
}

// tableSeqs returns the SEQ column of an ls table.
func tableSeqs(out string) []string {
	var seqs []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		seqs = append(seqs, strings.Fields(line)[0])
	}
	return seqs
}

func TestQuarantineLs(t *testing.T) {
	t.Parallel()
	env := newQuarantineEnv(t)
	code, out, errOut := qrun(t, env.url, "quarantine", "ls")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Equal(t, []string{"SEQ", "AGE", "REASON", "PERSONA", "TASK", "ATTEMPTS", "LAST", "ERROR"}, strings.Fields(lines[0]))
	require.Len(t, lines, 1+len(schemas.Reasons)+2)
	require.Equal(t, fmt.Sprint(env.seqs["p2"]), strings.Fields(lines[1])[0], "newest first")
	require.Contains(t, lines[1], "schema mismatch in answer for p2")

	cases := map[string]struct {
		args []string
		want []uint64
	}{
		"Reason":   {[]string{"--reason", "terminal", "--persona", "planner"}, []uint64{env.seqs["p2"], env.seqs["p1"]}},
		"Reasons":  {[]string{"--reason", "deferred,escalated"}, []uint64{env.seqs["t-escalated"], env.seqs["t-deferred"]}},
		"Task":     {[]string{"--task", "p1"}, []uint64{env.seqs["p1"]}},
		"Since":    {[]string{"--since", "1h", "--persona", "planner"}, []uint64{env.seqs["p2"], env.seqs["p1"]}},
		"SinceRFC": {[]string{"--since", time.Now().Add(time.Hour).Format(time.RFC3339)}, nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := qrun(t, env.url, append([]string{"quarantine", "ls"}, c.args...)...)
			require.Equal(t, 0, code, errOut)
			if c.want == nil {
				require.Equal(t, "no quarantined records match\n", out)
				return
			}
			var want []string
			for _, s := range c.want {
				want = append(want, fmt.Sprint(s))
			}
			require.Equal(t, want, tableSeqs(out))
		})
	}

	t.Run("LimitSaysWhatItLeftOut", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := qrun(t, env.url, "quarantine", "ls", "--limit", "2")
		require.Equal(t, 0, code, errOut)
		require.Len(t, tableSeqs(out), 2)
		require.Contains(t, errOut, fmt.Sprintf("showing the newest 2 of %d matching records", len(schemas.Reasons)+2))
	})
	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := qrun(t, env.url, "quarantine", "ls", "--reason", "max_deliveries", "-o", "json")
		require.Equal(t, 0, code, errOut)
		var got []struct {
			Seq      uint64                   `json:"seq"`
			Subject  string                   `json:"subject"`
			StoredAt time.Time                `json:"stored_at"`
			Size     int                      `json:"size"`
			Record   schemas.QuarantineRecord `json:"record"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &got))
		require.Len(t, got, 1)
		require.Equal(t, env.seqs["t-max_deliveries"], got[0].Seq)
		require.Equal(t, "personaq.quarantine.max_deliveries.tester", got[0].Subject)
		require.Equal(t, schemas.ReasonMaxDeliveries, got[0].Record.Reason)
		require.Len(t, got[0].Record.Errors, 2)
		_, err := schemas.DecodeRequest(got[0].Record.Payload)
		require.NoError(t, err, "payload round-trips")
	})
	t.Run("BadReason", func(t *testing.T) {
		t.Parallel()
		code, _, errOut := qrun(t, env.url, "quarantine", "ls", "--reason", "oops")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, "--reason")
		require.Contains(t, errOut, "compensation_failed")
	})
	t.Run("EmptyJSONIsAnArray", func(t *testing.T) {
		t.Parallel()
		code, out, _ := qrun(t, env.url, "quarantine", "ls", "--persona", "nobody", "-o", "json")
		require.Equal(t, 0, code)
		require.Equal(t, "[]", strings.TrimSpace(out))
	})
}

func TestQuarantineStats(t *testing.T) {
	t.Parallel()
	env := newQuarantineEnv(t)
	code, out, errOut := qrun(t, env.url, "quarantine", "stats")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, fmt.Sprintf("quarantine PERSONAQ_QUARANTINE: %d records", len(schemas.Reasons)+2))
	require.Regexp(t, `terminal\s+3`, out)
	require.Regexp(t, `planner\s+2`, out)

	code, out, errOut = qrun(t, env.url, "quarantine", "stats", "-o", "json")
	require.Equal(t, 0, code, errOut)
	var st dlq.Stats
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.EqualValues(t, 3, st.ByReason["terminal"])
	require.EqualValues(t, len(schemas.Reasons), st.ByPersona["tester"])
	require.False(t, st.Oldest.IsZero())
}

func TestQuarantineShow(t *testing.T) {
	t.Parallel()
	env := newQuarantineEnv(t)
	code, out, errOut := qrun(t, env.url, "quarantine", "show", fmt.Sprint(env.seqs["p1"]))
	require.Equal(t, 0, code, errOut)
	for _, want := range []string{
		"terminal  (q.PERSONAQ_REQUESTS.100)", "terminal: all attempts failed", `"task_id": "p1"`, "payload (",
		"error history", "attempt 1 [agent-a]  retryable", "attempt 2 [agent-a]  terminal BadRequestError",
		"schema mismatch in answer for p1", "+1.5s", "Nats-Msg-Id",
	} {
		require.Contains(t, out, want)
	}
	code, out, _ = qrun(t, env.url, "quarantine", "show", fmt.Sprint(env.seqs["p1"]), "-o", "json")
	require.Equal(t, 0, code)
	var e dlq.Entry
	require.NoError(t, json.Unmarshal([]byte(out), &e))
	require.Equal(t, "p1", e.Record.TaskID)

	code, _, errOut = qrun(t, env.url, "quarantine", "show", "9999")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "quarantine record not found: seq 9999 in PERSONAQ_QUARANTINE")
	code, _, errOut = qrun(t, env.url, "quarantine", "show", "abc")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `invalid sequence "abc"`)
}

func TestQuarantineErrorsAreClear(t *testing.T) {
	t.Parallel()
	code, _, errOut := qrun(t, "nats://127.0.0.1:1", "quarantine", "ls")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "cannot reach NATS at nats://127.0.0.1:1")

	empty := testenv.StartNATS(t)
	for _, args := range [][]string{{"ls"}, {"stats"}, {"show", "1"}, {"replay", "1"}, {"purge", "--all", "--yes"}} {
		code, _, errOut = qrun(t, empty.URL(), append([]string{"quarantine"}, args...)...)
		require.Equal(t, 1, code, args)
		require.Contains(t, errOut, "quarantine stream missing: stream PERSONAQ_QUARANTINE does not exist", args)
		require.Contains(t, errOut, empty.URL(), args)
	}
}

func TestQuarantineReplay(t *testing.T) {
	t.Parallel()
	env := newQuarantineEnv(t)
	js := env.n.JetStream(t)
	requests := func() uint64 {
		s, err := js.Stream(context.Background(), "PERSONAQ_REQUESTS")
		require.NoError(t, err)
		info, err := s.Info(context.Background())
		require.NoError(t, err)
		return info.State.Msgs
	}

	// Named records act at once.
	seq := fmt.Sprint(env.seqs["t-exhausted"])
	code, out, errOut := qrun(t, env.url, "quarantine", "replay", seq)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "replayed seq "+seq+" (exhausted) to personaq.requests.tester seq 1 as request ")
	require.Contains(t, out, "-r1; record removed")
	require.Contains(t, out, "replayed 1 of 1 records (0 already replayed before, 0 failed); 1 removed from the quarantine")
	require.EqualValues(t, 1, requests())
	code, _, errOut = qrun(t, env.url, "quarantine", "replay", seq)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "quarantine record not found")

	// Bulk is a dry run without --yes.
	code, out, errOut = qrun(t, env.url, "quarantine", "replay", "--all", "--persona", "planner", "--progress-every", "1")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "would replay seq")
	require.Contains(t, out, "dry run: 2 of 2 records would be replayed; nothing was published; re-run with --yes")
	require.EqualValues(t, 1, requests())

	code, out, errOut = qrun(t, env.url, "quarantine", "replay", "--all", "--persona", "planner", "--yes", "--keep", "--progress-every", "1")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "replayed 2 of 2 records")
	require.Contains(t, errOut, "replay: 1/2 (50%)")
	require.Contains(t, errOut, "replay: 2/2 (100%)")
	require.EqualValues(t, 3, requests())

	// Kept records replayed again: published once.
	code, out, errOut = qrun(t, env.url, "quarantine", "replay", "--all", "--persona", "planner", "--yes", "--keep")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "was replayed before")
	require.Contains(t, out, "replayed 0 of 2 records (2 already replayed before, 0 failed)")
	require.EqualValues(t, 3, requests())

	// invalid_message records go out byte for byte, and the dry run says so.
	code, out, errOut = qrun(t, env.url, "quarantine", "replay", "--dry-run", fmt.Sprint(env.seqs["t-invalid_message"]))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "as request") // this fixture's payload is a valid request

	code, _, errOut = qrun(t, env.url, "quarantine", "replay", "--reason", "terminal")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "add --all")
	code, _, errOut = qrun(t, env.url, "quarantine", "replay")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "name the records")
	code, _, errOut = qrun(t, env.url, "quarantine", "replay", "3", "--all")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not both")
}

func TestQuarantineReplayVerbatimSaysItWillFailAgain(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	js := n.JetStream(t)
	topo := wire.Topology{}.WithDefaults()
	require.NoError(t, consumers.Provision(context.Background(), js, topo, nil))
	seq, _, err := dlq.NewWriter(js, topo.QuarantineSubject).Put(context.Background(), &schemas.QuarantineRecord{
		SchemaVersion: schemas.Version, ID: "q.PERSONAQ_REQUESTS.5", Reason: schemas.ReasonInvalidMessage,
		Detail: "message could not be decoded", OriginalSubject: "personaq.requests.tester", Payload: []byte("not json"),
		Persona: "tester", QuarantinedAt: time.Now().UTC(),
	})
	require.NoError(t, err)
	code, out, errOut := qrun(t, n.URL(), "quarantine", "replay", "--all", "--reason", "invalid_message")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, fmt.Sprintf("would replay seq %d (invalid_message) to personaq.requests.tester byte for byte", seq))
	require.Contains(t, out, "quarantined again as invalid_message")
	code, out, _ = qrun(t, n.URL(), "quarantine", "show", fmt.Sprint(seq))
	require.Equal(t, 0, code)
	require.Contains(t, out, "not json\n  (not valid JSON)")
}

func TestQuarantinePurge(t *testing.T) {
	t.Parallel()
	env := newQuarantineEnv(t)
	total := len(schemas.Reasons) + 2
	count := func() int {
		_, out, _ := qrun(t, env.url, "quarantine", "ls", "--limit", "0", "-o", "json")
		var es []dlq.Entry
		require.NoError(t, json.Unmarshal([]byte(out), &es))
		return len(es)
	}
	code, out, errOut := qrun(t, env.url, "quarantine", "purge", "--all", "--reason", "terminal")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "dry run: 3 records would be deleted")
	require.Equal(t, total, count())

	code, out, errOut = qrun(t, env.url, "quarantine", "purge", "--all", "--reason", "terminal", "--yes")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "purged 3 of 3 records (0 failed)")
	require.Equal(t, total-3, count())

	seq := fmt.Sprint(env.seqs["t-deferred"])
	code, out, _ = qrun(t, env.url, "quarantine", "purge", seq)
	require.Equal(t, 0, code)
	require.Contains(t, out, "dry run: 1 records would be deleted", "named records are confirmation-guarded too")
	code, out, _ = qrun(t, env.url, "quarantine", "purge", seq, "--yes")
	require.Equal(t, 0, code)
	require.Contains(t, out, "purged 1 of 1")
	require.Equal(t, total-4, count())
}
