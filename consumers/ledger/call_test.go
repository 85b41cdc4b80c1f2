package ledger

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

// callLedger is a ledger whose calls are only built, never sent: the
// client is never dialled.
func callLedger(t testing.TB) *Ledger {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	l, err := New(Config{
		Client: c, Prefix: "pq", TTL: time.Hour, MaxHistory: 20,
		Now: func() time.Time { return time.UnixMilli(1_700_000_000_123) },
	})
	require.NoError(t, err)
	return l
}

// The keys and arguments the scripts get are pinned to literal values: the
// scripts (and the data already stored under those keys) read them by
// position and format, so building them faster must not change a byte.
func TestBeginCallPinned(t *testing.T) {
	t.Parallel()
	l := callLedger(t)
	keys, args := l.beginCall(StepKey{TaskID: "TASK-42", Step: "plan"}, `req-"1"`, beginOptions{})
	require.Equal(t, []string{"pq:{TASK-42}:plan:meta", "pq:{TASK-42}:plan:attempts", "pq:{TASK-42}:plan:lease"}, keys)
	require.Equal(t, []any{`"req-\"1\""`, int64(1_700_000_000_123), int64(3_600_000), 20,
		`"attempt did not finish (worker lost)"`, int64(0), 0, ""}, args)

	keys, args = l.beginCall(StepKey{TaskID: "a}b{c%d"}, "r", beginOptions{
		lease: 30 * time.Second, floor: 3, key: "r1.7.2", epochFloor: true, published: 1_600_000_000_000, delivered: 4,
	})
	require.Equal(t, []string{"pq:{a%7Db%7Bc%25d}::meta", "pq:{a%7Db%7Bc%25d}::attempts", "pq:{a%7Db%7Bc%25d}::lease", "pq:epoch"}, keys)
	require.Equal(t, []any{`"r"`, int64(1_700_000_000_123), int64(3_600_000), 20,
		`"attempt did not finish (worker lost)"`, int64(30_000), 3, "r1.7.2", int64(1_600_000_000_000), int64(4)}, args)
}

func TestFinishCallPinned(t *testing.T) {
	t.Parallel()
	l := callLedger(t)
	now := time.UnixMilli(1_700_000_000_456)
	keys, args := l.finishCall(StepKey{TaskID: "T", Step: "s"}, 2,
		FinishOptions{Counted: true, RequestID: "req-1", Lease: Lease{Token: 7, Attempt: 2}}, `{"attempt":2}`, now)
	require.Equal(t, []string{"pq:{T}:s:meta", "pq:{T}:s:attempts", "pq:{T}:s:lease"}, keys)
	require.Equal(t, []any{2, "1", "0", `{"attempt":2}`, "req-1", int64(1_700_000_000_456), int64(3_600_000), 20, "7|2"}, args)

	_, args = l.finishCall(StepKey{TaskID: "T"}, 1, FinishOptions{Succeeded: true}, "", now)
	require.Equal(t, []any{1, "0", "1", "", "", int64(1_700_000_000_456), int64(3_600_000), 20, ""}, args)
}

// BenchmarkBeginCall is what Begin builds before it sends: the step's keys
// and the script's arguments.
func BenchmarkBeginCall(b *testing.B) {
	l := callLedger(b)
	key := StepKey{TaskID: "bench-task-00000042", Step: "implement"}
	const id = "0b6e0d6c-1d7f-4f0e-9f5e-2b1f2f7d9a11"
	o := beginOptions{lease: 30 * time.Second, floor: 0}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = l.beginCall(key, id, o)
	}
}

// BenchmarkFinishCall is what Finish builds before it sends: the attempt
// record, the step's keys and the script's arguments.
func BenchmarkFinishCall(b *testing.B) {
	l := callLedger(b)
	key := StepKey{TaskID: "bench-task-00000042", Step: "implement"}
	opts := FinishOptions{Counted: true, Succeeded: true, RequestID: "0b6e0d6c-1d7f-4f0e-9f5e-2b1f2f7d9a11", Lease: Lease{Key: key, Token: 12, Attempt: 1}}
	a := retry.Attempt{
		Number: 1, Role: retry.RolePrimary, Agent: "claude-sonnet", Class: retry.ClassSucceeded,
		Progress: retry.Progress{Completed: 1, Total: 1}, Duration: 3 * time.Millisecond,
		At: time.UnixMilli(1_700_000_000_000),
	}
	now := time.UnixMilli(1_700_000_000_456)
	b.ReportAllocs()
	for b.Loop() {
		rec, err := encodeRecord(a, opts.RequestID, DefaultMaxErrorLen)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = l.finishCall(key, a.Number, opts, rec, now)
	}
}
