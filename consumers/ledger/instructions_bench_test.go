package ledger_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
)

// BenchmarkLedgerScriptInstructions counts the instructions redis-server
// executes per attempt as the runtime makes it (Begin with a lease and an
// idempotency key, Finish fenced by the lease), with redis-server run under
// valgrind's callgrind: a count, not a time, so the same scripts give the
// same figure however loaded the machine is, and two versions of the
// scripts compare in one run each. The counters are dumped after a
// warm-up and again after b.N attempts; the second dump holds exactly
// those. Skipped without valgrind.
//
//	go test -run='^$' -bench='^BenchmarkLedgerScriptInstructions$' -benchtime=2000x ./consumers/ledger/
//
// PERSONAQ_BENCH_CALLGRIND_OUT=/tmp/cg.out keeps the dumps (/tmp/cg.out.2:
// the attempts alone) for `callgrind_annotate --inclusive=yes`.
func BenchmarkLedgerScriptInstructions(b *testing.B) {
	valgrind, err := exec.LookPath("valgrind")
	if err != nil {
		b.Skip("valgrind not installed")
	}
	control, err := exec.LookPath("callgrind_control")
	if err != nil {
		b.Skip("callgrind_control not installed")
	}
	redisServer, err := exec.LookPath("redis-server")
	if err != nil {
		redisServer = "/usr/bin/redis-server"
	}
	dir := b.TempDir()
	out := filepath.Join(dir, "callgrind.out")
	if keep := os.Getenv("PERSONAQ_BENCH_CALLGRIND_OUT"); keep != "" {
		out = keep // the dumps kept, for callgrind_annotate: <keep>.2 holds the b.N attempts
	}
	wrapper := filepath.Join(dir, "redis-server")
	script := "#!/bin/sh\nexec " + valgrind + " --tool=callgrind --callgrind-out-file=" + out + " " + redisServer + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		b.Fatal(err)
	}
	b.Setenv(testenv.RedisServerEnv, wrapper)
	r := testenv.StartRedis(b)
	c := r.Client(b)
	ctx := context.Background()
	l, err := ledger.New(ledger.Config{Client: c, Prefix: "count"})
	if err != nil {
		b.Fatal(err)
	}
	pid, err := c.InfoMap(ctx, "server").Result()
	if err != nil {
		b.Fatal(err)
	}
	dump := func() {
		b.Helper()
		if o, err := exec.Command(control, "-d", pid["Server"]["process_id"]).CombinedOutput(); err != nil {
			b.Fatalf("callgrind_control: %v: %s", err, o)
		}
	}
	attempts := func(from, n int) {
		for i := from; i < from+n; i++ {
			req := "req-" + strconv.Itoa(i)
			key := ledger.StepKey{TaskID: "task-" + strconv.Itoa(i), Step: "implement"}
			bg, err := l.Begin(ctx, key, req, ledger.WithLease(20*time.Second), ledger.WithIdempotencyKey("k7f3a."+req+".1"))
			if err != nil {
				b.Fatal(err)
			}
			a := retry.Attempt{Number: bg.Attempt, Role: retry.RolePrimary, Agent: "claude-sonnet", Class: retry.ClassSucceeded, Duration: 12 * time.Millisecond}
			if err := l.Finish(ctx, key, a, ledger.FinishOptions{Counted: true, Succeeded: true, RequestID: req, Lease: bg.Lease}); err != nil {
				b.Fatal(err)
			}
		}
	}
	attempts(0, 100) // scripts loaded, allocator and Lua warm
	dump()           // callgrind.out.1: start-up and warm-up
	b.ResetTimer()
	attempts(100, b.N)
	b.StopTimer()
	dump() // callgrind.out.2: the b.N attempts alone
	b.ReportMetric(float64(callgrindTotal(b, out+".2"))/float64(b.N), "redis-instructions/op")
}

// callgrindTotal reads the event total of one callgrind dump.
func callgrindTotal(b *testing.B, path string) int64 {
	b.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "summary: "); ok {
			n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			if err != nil {
				b.Fatalf("%s: %v", path, err)
			}
			return n
		}
	}
	b.Fatalf("%s: no summary line", path)
	return 0
}
