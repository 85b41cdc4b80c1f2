package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A trial is one measurement of one system, run in a child process of the
// driver (`peers trial ...`) so each system's client has a process of its
// own: its CPU time (getrusage) is the queue client's alone, and no heap or
// goroutines are left over from another system.

// Trial cases.
const (
	caseThroughput = "throughput" // jobs enqueued first, no-op handler
	caseSpread     = "spread"     // one job every spreadEvery while workers run; each fails once
	caseBurst      = "burst"      // jobs enqueued first; each fails once, so the retries are due together
)

// retryDelay is the delay every system is configured to wait before a
// failed job's second attempt.
const retryDelay = time.Second

// spreadEvery is how often the spread case enqueues a job.
const spreadEvery = 10 * time.Millisecond

// trialDeadline bounds any wait in a trial; reaching it fails the trial.
const trialDeadline = 5 * time.Minute

// payload is the job's input in every system (~200 bytes of JSON), the same
// input personaq's benchmarks carry.
var payload = json.RawMessage(`{"prompt":"Implement the retry budget for the planner persona and add table-driven tests for linear, exponential and list schedules; keep the public API unchanged.","files":["retry/budget.go","retry/budget_test.go"]}`)

var errFirstAttempt = errors.New("peers: the first attempt fails")

// trialConfig is what the driver passes a trial on its command line.
type trialConfig struct {
	system     string
	kase       string
	jobs       int
	workers    int
	id         string // unique per trial: stream names, key prefixes
	redisAddr  string
	pgURL      string
	natsURL    string
	serverPIDs []int // server processes whose CPU time the trial reports
	cpuprofile string
	profilePID int // a server to signal SIGUSR1/SIGUSR2 around the timed part
}

// trialResult is what a trial prints on stdout, as JSON.
type trialResult struct {
	System    string  `json:"system"`
	Case      string  `json:"case"`
	Jobs      int     `json:"jobs"`
	Seconds   float64 `json:"seconds"`    // start of consuming → every job settled
	ClientCPU float64 `json:"client_cpu"` // this process, user+sys, seconds, same interval
	ServerCPU float64 `json:"server_cpu"` // serverPIDs (and their children), user+sys, seconds
	// ServerCPUEach is ServerCPU per server, in the order of serverPIDs.
	ServerCPUEach []float64 `json:"server_cpu_each"`
	servers       []string  // the driver's names for ServerCPUEach
	FirstJob      float64   `json:"first_job"` // seconds from starting the workers to the first handler call
	Lateness      []float64 `json:"lateness"`  // ms, per job: second attempt start − (first attempt's return + retryDelay)
	// RecordBatches, RecordsBatched and BatchSeconds: the runtime's atomic
	// batch commits of terminal records in the timed part (personaq's
	// systems; zero for the others).
	RecordBatches  int64   `json:"record_batches,omitempty"`
	RecordsBatched int64   `json:"records_batched,omitempty"`
	BatchSeconds   float64 `json:"batch_seconds,omitempty"`
}

// batchStats is what a batchReporter counted so far.
type batchStats struct {
	commits, records int64
	took             time.Duration
}

// batchReporter is a queue that counts its terminal records' batch
// commits (personaq's runtime).
type batchReporter interface{ recordBatches() batchStats }

// batchesOf is q's count, or zero.
func batchesOf(q queue) batchStats {
	if r, ok := q.(batchReporter); ok {
		return r.recordBatches()
	}
	return batchStats{}
}

// eachServer is the servers' CPU per 1,000 jobs, by server ("nats 0.07 s,
// redis 0.12 s").
func (r *trialResult) eachServer() string {
	var parts []string
	for i, cpu := range r.ServerCPUEach {
		name := fmt.Sprintf("server %d", i+1)
		if i < len(r.servers) {
			name = r.servers[i]
		}
		parts = append(parts, fmt.Sprintf("%s %.2f s", name, 1000*cpu/float64(r.Jobs)))
	}
	return strings.Join(parts, ", ")
}

// handlerFunc is the job handler every system runs: id is the job's own id
// (in its payload), attempt is 1-based.
type handlerFunc func(id string, attempt int) error

// queue is one system as a trial drives it. open (per system) creates the
// client and whatever the jobs need (streams, tables, keys) with h as the
// handler and the given concurrency, and returns without consuming.
type queue interface {
	// enqueue stores jobs with these ids and returns when they are durable.
	enqueue(ctx context.Context, ids []string) error
	// start begins consuming with the configured concurrency.
	start(ctx context.Context) error
	// pending counts jobs not yet settled (succeeded and the success stored).
	pending(ctx context.Context) (int, error)
	// close stops consuming and releases the client.
	close()
}

type openFunc func(ctx context.Context, tc trialConfig, h handlerFunc) (queue, error)

// systems maps a -system name to its opener.
var systems = map[string]openFunc{
	"asynq":             openAsynq,
	"river-default":     openRiverDefault,
	"river-tuned":       openRiverTuned,
	"personaq":          openPersonaqLedger,
	"personaq-noledger": openPersonaqNoLedger,
	// Throughput only (see floorQueue).
	"personaq-floor":          openFloorLedger,
	"personaq-floor-noledger": openFloorNoLedger,
	"personaq-floor-nofinish": openFloorWithoutFinish,
	"personaq-floor-minredis": openFloorRedisProbe,
}

func trialMain(args []string) error {
	fs := flag.NewFlagSet("trial", flag.ExitOnError)
	var tc trialConfig
	var pids string
	fs.StringVar(&tc.system, "system", "", "system to run")
	fs.StringVar(&tc.kase, "case", caseThroughput, "throughput, spread or burst")
	fs.IntVar(&tc.jobs, "jobs", 10_000, "jobs")
	fs.IntVar(&tc.workers, "workers", 64, "concurrency")
	fs.StringVar(&tc.id, "id", "t", "unique trial id")
	fs.StringVar(&tc.redisAddr, "redis", "", "redis-server host:port")
	fs.StringVar(&tc.pgURL, "pg", "", "PostgreSQL URL")
	fs.StringVar(&tc.natsURL, "nats", "", "nats-server URL")
	fs.StringVar(&pids, "server-pids", "", "comma-separated server pids to measure")
	fs.StringVar(&tc.cpuprofile, "cpuprofile", "", "write this process's CPU profile of the timed part here")
	fs.IntVar(&tc.profilePID, "profile-pid", 0, "server process to send SIGUSR1 (start profiling) and SIGUSR2 (stop) around the timed part")
	_ = fs.Parse(args)
	for f := range strings.SplitSeq(pids, ",") {
		if f == "" {
			continue
		}
		pid, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("-server-pids: %w", err)
		}
		tc.serverPIDs = append(tc.serverPIDs, pid)
	}
	open, ok := systems[tc.system]
	if !ok {
		return fmt.Errorf("unknown -system %q", tc.system)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*trialDeadline)
	defer cancel()
	res, err := runTrial(ctx, tc, open)
	if err != nil {
		return fmt.Errorf("%s %s: %w", tc.system, tc.kase, err)
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// runTrial runs one case: enqueue (all first, or while consuming for
// spread), consume until every job is settled, and measure.
func runTrial(ctx context.Context, tc trialConfig, open openFunc) (*trialResult, error) {
	ids := make([]string, tc.jobs)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-job-%06d", tc.id, i)
	}
	failing := tc.kase != caseThroughput
	var (
		done     = make(chan struct{})
		finished atomic.Int64
		mu       sync.Mutex
		failedAt = make(map[string]time.Time, tc.jobs)
		second   = make(map[string]time.Time, tc.jobs)
		first    atomic.Int64 // unix ns of the first handler call
	)
	h := func(id string, attempt int) error {
		now := time.Now()
		first.CompareAndSwap(0, now.UnixNano())
		if failing {
			mu.Lock()
			defer mu.Unlock()
			if attempt == 1 {
				failedAt[id] = time.Now()
				return errFirstAttempt
			}
			if _, dup := second[id]; dup {
				return nil
			}
			second[id] = now
		}
		if finished.Add(1) == int64(tc.jobs) {
			close(done)
		}
		return nil
	}
	q, err := open(ctx, tc, h)
	if err != nil {
		return nil, err
	}
	defer q.close()
	if tc.kase != caseSpread {
		if err := q.enqueue(ctx, ids); err != nil {
			return nil, fmt.Errorf("enqueue: %w", err)
		}
	}

	runtime.GC()
	if tc.cpuprofile != "" {
		f, err := os.Create(tc.cpuprofile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	if tc.profilePID != 0 {
		_ = syscall.Kill(tc.profilePID, syscall.SIGUSR1)
	}
	client0, server0, batches0 := selfCPU(), serversCPU(tc.serverPIDs), batchesOf(q)
	start := time.Now()
	if err := q.start(ctx); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	if tc.kase == caseSpread {
		tick := time.NewTicker(spreadEvery)
		for _, id := range ids {
			<-tick.C
			if err := q.enqueue(ctx, []string{id}); err != nil {
				return nil, fmt.Errorf("enqueue: %w", err)
			}
		}
		tick.Stop()
	}
	deadline := time.NewTimer(trialDeadline)
	defer deadline.Stop()
	select {
	case <-done:
	case <-deadline.C:
		return nil, fmt.Errorf("handler finished %d of %d jobs in %s", finished.Load(), tc.jobs, trialDeadline)
	}
	// The handler has seen every job; wait until every success is stored,
	// polling every millisecond (only in this tail).
	for {
		n, err := q.pending(ctx)
		if err != nil {
			return nil, fmt.Errorf("pending: %w", err)
		}
		if n == 0 {
			break
		}
		select {
		case <-time.After(time.Millisecond):
		case <-deadline.C:
			return nil, fmt.Errorf("%d jobs still unsettled after %s", n, trialDeadline)
		}
	}
	took := time.Since(start)
	client1, server1, batches1 := selfCPU(), serversCPU(tc.serverPIDs), batchesOf(q)
	if tc.profilePID != 0 {
		_ = syscall.Kill(tc.profilePID, syscall.SIGUSR2)
	}

	res := &trialResult{
		System: tc.system, Case: tc.kase, Jobs: tc.jobs, Seconds: took.Seconds(),
		ClientCPU: client1 - client0,
		FirstJob:  time.Unix(0, first.Load()).Sub(start).Seconds(),

		RecordBatches: batches1.commits - batches0.commits, RecordsBatched: batches1.records - batches0.records,
		BatchSeconds: (batches1.took - batches0.took).Seconds(),
	}
	for i := range server1 {
		res.ServerCPUEach = append(res.ServerCPUEach, server1[i]-server0[i])
		res.ServerCPU += server1[i] - server0[i]
	}
	mu.Lock()
	defer mu.Unlock()
	for id, at := range second {
		f, ok := failedAt[id]
		if !ok {
			return nil, fmt.Errorf("job %s: second attempt without a first", id)
		}
		res.Lateness = append(res.Lateness, float64(at.Sub(f.Add(retryDelay)))/float64(time.Millisecond))
	}
	return res, nil
}

// selfCPU is this process's user+sys CPU time in seconds (getrusage).
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return tvSeconds(ru.Utime) + tvSeconds(ru.Stime)
}

func tvSeconds(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
