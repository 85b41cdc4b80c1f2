package ledger_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
)

// backend hands out clients of one Redis-protocol server.
type backend struct {
	// real is false for miniredis, whose TTLs do not run down by themselves.
	real   bool
	client func(t *testing.T) redis.UniversalClient
}

// TestLedger runs the behaviour suite against a real redis-server.
func TestLedger(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)
	runSuite(t, backend{real: true, client: func(t *testing.T) redis.UniversalClient { return r.Client(t) }})
}

// TestLedgerCluster runs the suite against a Redis Cluster of three masters
// and three replicas: every script's keys must share one slot.
func TestLedgerCluster(t *testing.T) {
	t.Parallel()
	c := testenv.StartRedisCluster(t, 3, 1)
	runSuite(t, backend{real: true, client: func(t *testing.T) redis.UniversalClient { return c.Client(t) }})
}

// TestLedgerMiniredis runs the same suite against miniredis, which
// `personaq dev` uses: the scripts must work on both.
func TestLedgerMiniredis(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	runSuite(t, backend{client: func(t *testing.T) redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}})
}

// setup is one subtest's ledger with its own key prefix.
type setup struct {
	ctx    context.Context
	client redis.UniversalClient
	cfg    ledger.Config
	l      *ledger.Ledger
}

func newSetup(t *testing.T, b backend, mod func(*ledger.Config)) *setup {
	t.Helper()
	c := b.client(t)
	cfg := ledger.Config{Client: c, Prefix: "test:" + t.Name()}
	if mod != nil {
		mod(&cfg)
	}
	l, err := ledger.New(cfg)
	require.NoError(t, err)
	return &setup{ctx: t.Context(), client: c, cfg: cfg, l: l}
}

func (s *setup) begin(t *testing.T, key ledger.StepKey, req string) ledger.Begun {
	t.Helper()
	b, err := s.l.Begin(s.ctx, key, req)
	require.NoError(t, err)
	return b
}

func (s *setup) finish(t *testing.T, key ledger.StepKey, a retry.Attempt, opts ledger.FinishOptions) {
	t.Helper()
	require.NoError(t, s.l.Finish(s.ctx, key, a, opts))
}

func (s *setup) history(t *testing.T, key ledger.StepKey) ([]retry.Attempt, ledger.State) {
	t.Helper()
	h, st, err := s.l.History(s.ctx, key)
	require.NoError(t, err)
	return h, st
}

// fixedClock is a settable clock for Config.Now.
type fixedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fixedClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var step = ledger.StepKey{TaskID: "task-1", Step: "implement"}

func failed(n int, class retry.Class, msg string) retry.Attempt {
	return retry.Attempt{Number: n, Role: retry.RoleFor(n, true), Agent: "agent", Class: class, Error: msg}
}

func numbers(h []retry.Attempt) []int {
	out := make([]int, len(h))
	for i, a := range h {
		out[i] = a.Number
	}
	return out
}

// allKeys lists the keys matching pattern, on every master of a cluster.
func allKeys(t *testing.T, c redis.UniversalClient, pattern string) []string {
	t.Helper()
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		k, err := c.Keys(t.Context(), pattern).Result()
		require.NoError(t, err)
		return k
	}
	var mu sync.Mutex
	var out []string
	require.NoError(t, cc.ForEachMaster(t.Context(), func(ctx context.Context, m *redis.Client) error {
		k, err := m.Keys(ctx, pattern).Result()
		mu.Lock()
		defer mu.Unlock()
		out = append(out, k...)
		return err
	}))
	return out
}

func runSuite(t *testing.T, b backend) {
	epochFloorSuite(t, b)
	t.Run("BeginFinishSequence", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)

		bg := s.begin(t, step, "req-1")
		require.Equal(t, ledger.Begun{Attempt: 1, History: []retry.Attempt{}, Fresh: true}, bg)
		s.finish(t, step, failed(1, retry.ClassRetryable, "boom"), ledger.FinishOptions{Counted: true, RequestID: "req-1"})

		bg = s.begin(t, step, "req-1")
		require.Equal(t, 2, bg.Attempt)
		require.Equal(t, []int{1}, numbers(bg.History))
		s.finish(t, step, failed(2, retry.ClassValidation, "bad json"), ledger.FinishOptions{Counted: true, RequestID: "req-1"})

		bg = s.begin(t, step, "req-1")
		require.Equal(t, 3, bg.Attempt)
		require.Equal(t, []int{1, 2}, numbers(bg.History))
		require.Equal(t, retry.ClassValidation, bg.History[1].Class)
		require.Equal(t, "bad json", bg.History[1].Error)

		_, st := s.history(t, step)
		require.Equal(t, 2, st.Attempts)
		require.Equal(t, 1, st.InFlight)
		require.False(t, st.Done)

		ok := failed(3, retry.ClassSucceeded, "")
		s.finish(t, step, ok, ledger.FinishOptions{Counted: true, Succeeded: true, RequestID: "req-1"})
		h, st := s.history(t, step)
		require.Equal(t, []int{1, 2, 3}, numbers(h))
		require.Equal(t, 3, st.Attempts)
		require.Equal(t, 0, st.InFlight)
		require.True(t, st.Done)
		require.Equal(t, "req-1", st.DoneRequestID)
		require.False(t, st.DoneAt.IsZero())

		// Steps are independent of one another.
		other := ledger.StepKey{TaskID: step.TaskID, Step: "review"}
		require.Equal(t, 1, s.begin(t, other, "req-2").Attempt)
	})

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		at := time.Date(2026, 3, 4, 5, 6, 7, 891_000_000, time.UTC)
		want := []retry.Attempt{
			{
				Number: 1, Role: retry.RolePrimary, Agent: "claude", Class: retry.ClassNetwork,
				ErrorTypes: []string{"OpError", "DNSError"}, Error: "dial tcp: lookup api: no such host",
				RetryAfter: 1500 * time.Millisecond, Progress: retry.Progress{Completed: 0, Total: 9},
				Duration: 12_345 * time.Millisecond, At: at,
			},
			{
				Number: 2, Role: retry.RoleFallback, Agent: "gpt", Class: retry.ClassValidation,
				ErrorTypes: []string{"SchemaError"}, Error: "missing field \"plan\"",
				Feedback: "answer with a JSON object with a \"plan\" field — ünïcödé ok",
				Progress: retry.Progress{Completed: 5, Total: 9}, Duration: time.Minute, At: at.Add(time.Minute),
				Usage: retry.Usage{InputTokens: 12_000, OutputTokens: 1_500, CostUSD: 0.0375},
			},
			{
				Number: 3, Role: retry.RolePrimary, Agent: "claude", Class: retry.ClassTimeout,
				Error: "context deadline exceeded", Progress: retry.Progress{Completed: 5, Total: 9},
				Duration: 90 * time.Second, At: at.Add(3 * time.Minute), Usage: retry.Usage{InputTokens: 9_000},
			},
		}
		for _, a := range want {
			bg := s.begin(t, step, "req")
			require.Equal(t, a.Number, bg.Attempt)
			s.finish(t, step, a, ledger.FinishOptions{Counted: true, RequestID: "req"})
		}
		bg := s.begin(t, step, "req")
		require.Empty(t, cmp.Diff(want, bg.History))
		h, _ := s.history(t, step)
		require.Empty(t, cmp.Diff(want, h))
	})

	t.Run("CompletionMarker", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		bg := s.begin(t, step, "req-a")
		s.finish(t, step, failed(bg.Attempt, retry.ClassSucceeded, ""),
			ledger.FinishOptions{Counted: true, Succeeded: true, RequestID: "req-a"})
		_, before := s.history(t, step)

		// A redelivery after a crash between side effect and ack.
		for range 3 {
			bg = s.begin(t, step, "req-a")
			require.Equal(t, ledger.Begun{Done: true, DoneRequestID: "req-a"}, bg)
		}
		h, after := s.history(t, step)
		require.Len(t, h, 1)
		require.Equal(t, before.Attempts, after.Attempts)
		require.Equal(t, 0, after.InFlight, "a Begin on a done step writes nothing")
	})

	t.Run("UncountedFinishDoesNotBurnAttempt", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		for range 3 { // snoozed, released by shutdown, released by an infra fault
			bg := s.begin(t, step, "req")
			require.Equal(t, 1, bg.Attempt)
			s.finish(t, step, retry.Attempt{Number: 1, Class: retry.ClassSnooze}, ledger.FinishOptions{})
		}
		h, st := s.history(t, step)
		require.Empty(t, h)
		require.Equal(t, 0, st.Attempts)
		require.Equal(t, 0, st.InFlight)

		bg := s.begin(t, step, "req")
		require.Equal(t, 1, bg.Attempt)
		s.finish(t, step, failed(1, retry.ClassRetryable, "x"), ledger.FinishOptions{Counted: true})
		bg = s.begin(t, step, "req")
		require.Equal(t, 2, bg.Attempt)
		s.finish(t, step, retry.Attempt{Number: 2, Class: retry.ClassSnooze}, ledger.FinishOptions{})
		require.Equal(t, 2, s.begin(t, step, "req").Attempt)

		// A second release of the same attempt changes nothing.
		s.finish(t, step, retry.Attempt{Number: 2}, ledger.FinishOptions{})
		s.finish(t, step, retry.Attempt{Number: 2}, ledger.FinishOptions{})
		require.Equal(t, 2, s.begin(t, step, "req").Attempt)
	})

	t.Run("LostAttemptIsRecorded", func(t *testing.T) {
		t.Parallel()
		t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		clock := &fixedClock{now: t0}
		s := newSetup(t, b, func(c *ledger.Config) { c.Now = clock.Now })

		require.Equal(t, 1, s.begin(t, step, "req-a").Attempt)
		// The worker dies; JetStream redelivers after AckWait.
		clock.Advance(90 * time.Second)
		bg := s.begin(t, step, "req-a")
		lost := retry.Attempt{
			Number: 1, Class: retry.ClassRetryable, Error: ledger.LostAttemptError,
			Duration: 90 * time.Second, At: t0,
		}
		require.Empty(t, cmp.Diff(ledger.Begun{Attempt: 2, Lost: 1, History: []retry.Attempt{lost}}, bg))
		_, st := s.history(t, step)
		require.Equal(t, 1, st.Attempts)
		require.Equal(t, 1, st.InFlight)

		// That one dies too.
		clock.Advance(time.Minute)
		bg = s.begin(t, step, "req-a")
		require.Equal(t, 3, bg.Attempt)
		require.Equal(t, []int{1, 2}, numbers(bg.History))
		require.Equal(t, ledger.LostAttemptError, bg.History[1].Error)
		require.Equal(t, time.Minute, bg.History[1].Duration)
	})

	t.Run("LateFinishReplacesLostRecord", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		require.Equal(t, 1, s.begin(t, step, "slow").Attempt)
		bg := s.begin(t, step, "redelivered")
		require.Equal(t, 2, bg.Attempt)
		require.Equal(t, 1, bg.Lost)

		// The slow worker was alive after all and finishes attempt 1.
		real1 := failed(1, retry.ClassValidation, "late but real")
		real1.At = time.UnixMilli(time.Now().UnixMilli()).UTC()
		s.finish(t, step, real1, ledger.FinishOptions{Counted: true})
		// A repeated counted Finish is a no-op.
		s.finish(t, step, real1, ledger.FinishOptions{Counted: true})
		h, st := s.history(t, step)
		require.Empty(t, cmp.Diff([]retry.Attempt{real1}, h))
		require.Equal(t, 1, st.Attempts)

		// A lost attempt later released (uncounted) leaves no record and its
		// number is handed out again.
		s.finish(t, step, failed(2, retry.ClassRetryable, "x"), ledger.FinishOptions{Counted: true})
		require.Equal(t, 3, s.begin(t, step, "a").Attempt)
		require.Equal(t, 4, s.begin(t, step, "b").Attempt) // 3 is now recorded as lost
		s.finish(t, step, retry.Attempt{Number: 3}, ledger.FinishOptions{})
		h, st = s.history(t, step)
		require.Equal(t, []int{1, 2}, numbers(h))
		require.Equal(t, 2, st.Attempts)
		s.finish(t, step, failed(4, retry.ClassRetryable, "x"), ledger.FinishOptions{Counted: true})
		require.Equal(t, 3, s.begin(t, step, "c").Attempt)
	})

	t.Run("MaxHistoryTrims", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, func(c *ledger.Config) { c.MaxHistory = 3 })
		for n := 1; n <= 5; n++ {
			require.Equal(t, n, s.begin(t, step, "req").Attempt)
			s.finish(t, step, failed(n, retry.ClassRetryable, fmt.Sprint("e", n)), ledger.FinishOptions{Counted: true})
		}
		bg := s.begin(t, step, "req")
		require.Equal(t, 6, bg.Attempt, "trimming never resets the counter")
		require.Equal(t, []int{3, 4, 5}, numbers(bg.History))
		require.Equal(t, 2, bg.Dropped)
		h, st := s.history(t, step)
		require.Equal(t, []int{3, 4, 5}, numbers(h))
		require.Equal(t, 5, st.Attempts)
		require.Equal(t, 2, st.Dropped)
	})

	t.Run("ErrorTextTruncated", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, func(c *ledger.Config) { c.MaxErrorLen = 16 })
		long := strings.Repeat("é", 40) // 80 bytes, 2 per rune
		a := failed(1, retry.ClassValidation, long)
		a.Feedback = "short"
		s.begin(t, step, "req")
		s.finish(t, step, a, ledger.FinishOptions{Counted: true})
		h, _ := s.history(t, step)
		require.Len(t, h, 1)
		require.Equal(t, strings.Repeat("é", 8)+"…[truncated 64 of 80 bytes]", h[0].Error)
		require.True(t, utf8.ValidString(h[0].Error))
		require.Equal(t, "short", h[0].Feedback)

		// A cut inside a rune backs off to the rune's start.
		a = failed(2, retry.ClassValidation, "x"+long)
		s.begin(t, step, "req")
		s.finish(t, step, a, ledger.FinishOptions{Counted: true})
		h, _ = s.history(t, step)
		require.Equal(t, "x"+strings.Repeat("é", 7)+"…[truncated 66 of 81 bytes]", h[1].Error)
	})

	t.Run("TTLSetAndRefreshed", func(t *testing.T) {
		t.Parallel()
		const ttl = 5 * time.Second
		s := newSetup(t, b, func(c *ledger.Config) { c.TTL = ttl })
		keys := func() []string {
			k := allKeys(t, s.client, s.cfg.Prefix+"*")
			slices.Sort(k)
			return k
		}
		requireTTLs := func(n int) {
			t.Helper()
			k := keys()
			require.Len(t, k, n)
			for _, key := range k {
				d, err := s.client.PTTL(s.ctx, key).Result()
				require.NoError(t, err)
				require.Greater(t, d, ttl-2*time.Second, key)
				require.LessOrEqual(t, d, ttl, key)
			}
		}
		s.begin(t, step, "req")
		requireTTLs(1) // the meta hash; no records yet
		s.finish(t, step, failed(1, retry.ClassRetryable, "x"), ledger.FinishOptions{Counted: true})
		requireTTLs(2)

		for _, key := range keys() {
			require.NoError(t, s.client.PExpire(s.ctx, key, 300*time.Millisecond).Err())
		}
		s.begin(t, step, "req")
		requireTTLs(2)

		for _, key := range keys() {
			require.NoError(t, s.client.PExpire(s.ctx, key, 300*time.Millisecond).Err())
		}
		s.finish(t, step, retry.Attempt{Number: 2}, ledger.FinishOptions{})
		requireTTLs(2)

		_, st := s.history(t, step)
		require.Greater(t, st.TTL, ttl-2*time.Second)
		require.LessOrEqual(t, st.TTL, ttl)
	})

	if b.real {
		t.Run("KeysExpire", func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, b, func(c *ledger.Config) { c.TTL = 200 * time.Millisecond })
			s.begin(t, step, "req")
			s.finish(t, step, failed(1, retry.ClassRetryable, "x"), ledger.FinishOptions{Counted: true})
			// One short bounded wait for Redis to expire the keys.
			require.Eventually(t, func() bool {
				n, err := s.client.Exists(s.ctx, s.cfg.Prefix+":{task-1}:implement:meta",
					s.cfg.Prefix+":{task-1}:implement:attempts").Result()
				return err == nil && n == 0
			}, 3*time.Second, 20*time.Millisecond)
			h, st := s.history(t, step)
			require.Empty(t, h)
			require.Equal(t, ledger.State{}, st)
			require.Equal(t, 1, s.begin(t, step, "req").Attempt)
		})
	}

	t.Run("StepsOfATask", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		// Tasks in different slots (on Cluster: on different masters), and
		// ids that read as SCAN patterns or share a prefix.
		for _, k := range []ledger.StepKey{
			{TaskID: "t", Step: "review"}, {TaskID: "t", Step: "a*"}, {TaskID: "t", Step: "implement"},
			{TaskID: "t", Step: ""}, {TaskID: "t2", Step: "x"}, {TaskID: "t*", Step: "y"},
			{TaskID: "t[1]", Step: "z"}, {TaskID: "u", Step: "w"},
		} {
			s.begin(t, k, "req")
		}
		for task, want := range map[string][]string{
			"t": {"", "a*", "implement", "review"}, "t*": {"y"}, "t[1]": {"z"}, "t2": {"x"}, "none": {},
		} {
			got, err := s.l.Steps(s.ctx, task)
			require.NoError(t, err)
			steps := []string{}
			for _, k := range got {
				require.Equal(t, task, k.TaskID)
				steps = append(steps, k.Step)
			}
			require.Equal(t, want, steps, task)
		}
	})

	t.Run("KeysShareHashTag", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		for _, task := range []string{"plain", "a}b", "{x}", "100%"} {
			k := ledger.StepKey{TaskID: task, Step: "s"}
			s.begin(t, k, "req")
			s.finish(t, k, failed(1, retry.ClassRetryable, "x"), ledger.FinishOptions{Counted: true})
		}
		// Two tasks that would collide without escaping stay apart.
		k1 := ledger.StepKey{TaskID: "a}:b", Step: "c"}
		k2 := ledger.StepKey{TaskID: "a", Step: "b}:c"}
		s.begin(t, k1, "req")
		require.Equal(t, 1, s.begin(t, k2, "req").Attempt)

		keys := allKeys(t, s.client, s.cfg.Prefix+"*")
		tags := map[string]int{}
		for _, k := range keys {
			tags[hashTag(k)]++
		}
		require.Equal(t, map[string]int{
			"plain": 2, "a%7Db": 2, "%7Bx%7D": 2, "100%25": 2, "a%7D:b": 1, "a": 1,
		}, tags)
	})

	t.Run("InvalidArguments", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		_, err := s.l.Begin(s.ctx, ledger.StepKey{Step: "x"}, "req")
		require.ErrorIs(t, err, ledger.ErrInvalidArgument)
		err = s.l.Finish(s.ctx, step, retry.Attempt{}, ledger.FinishOptions{Counted: true})
		require.ErrorIs(t, err, ledger.ErrInvalidArgument)
		_, _, err = s.l.History(s.ctx, ledger.StepKey{})
		require.ErrorIs(t, err, ledger.ErrInvalidArgument)
	})

	t.Run("CorruptData", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		s.begin(t, step, "req")
		s.finish(t, step, failed(1, retry.ClassRetryable, "x"), ledger.FinishOptions{Counted: true})
		list := s.cfg.Prefix + ":{task-1}:implement:attempts"
		require.NoError(t, s.client.RPush(s.ctx, list, `{"attempt":2,"class":"no-such-class"}`).Err())
		_, _, err := s.l.History(s.ctx, step)
		require.ErrorIs(t, err, ledger.ErrCorrupt)
		require.NotErrorIs(t, err, ledger.ErrUnavailable)

		require.NoError(t, s.client.LSet(s.ctx, list, 1, "not json").Err())
		_, err = s.l.Begin(s.ctx, step, "req")
		require.ErrorIs(t, err, ledger.ErrCorrupt)

		other := ledger.StepKey{TaskID: "task-2"}
		require.NoError(t, s.client.Set(s.ctx, s.cfg.Prefix+":{task-2}::meta", "a string", 0).Err())
		_, err = s.l.Begin(s.ctx, other, "req")
		require.ErrorIs(t, err, ledger.ErrCorrupt)
		require.NotErrorIs(t, err, ledger.ErrUnavailable)
	})

	t.Run("CanceledContextIsNotUnavailable", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		ctx, cancel := context.WithCancel(s.ctx)
		cancel()
		_, err := s.l.Begin(ctx, step, "req")
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, ledger.ErrUnavailable)
	})

	t.Run("Ping", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		require.NoError(t, s.l.Ping(s.ctx))
	})

	t.Run("Leases", func(t *testing.T) {
		t.Parallel()
		testLeases(t, b)
	})

	t.Run("ConcurrentReplicas", func(t *testing.T) {
		t.Parallel()
		testConcurrentReplicas(t, b)
	})
}

// hashTag returns the part of a key Redis Cluster hashes.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

// testConcurrentReplicas hammers one step from 16 goroutines spread over 3
// ledgers with separate clients (three replicas). Every attempt number must
// be held by one worker at a time, and at the end the history must hold
// every number from 1 up exactly once, one record per counted finish.
func testConcurrentReplicas(t *testing.T, b backend) {
	const (
		replicas   = 3
		workers    = 16
		iterations = 25
	)
	prefix := "test:" + t.Name()
	ls := make([]*ledger.Ledger, replicas)
	for i := range ls {
		l, err := ledger.New(ledger.Config{Client: b.client(t), Prefix: prefix, MaxHistory: 10_000})
		require.NoError(t, err)
		ls[i] = l
	}
	ctx := t.Context()

	var (
		mu      sync.Mutex
		holding = map[int]int{} // attempt number → worker
		counted int
		errs    []error
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			l := ls[w%replicas]
			for i := range iterations {
				bg, err := l.Begin(ctx, step, fmt.Sprintf("w%d-%d", w, i))
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mu.Lock()
				if other, ok := holding[bg.Attempt]; ok {
					errs = append(errs, fmt.Errorf("attempt %d handed to worker %d while worker %d holds it", bg.Attempt, w, other))
				}
				holding[bg.Attempt] = w
				mu.Unlock()

				release := i%5 == 4
				mu.Lock()
				delete(holding, bg.Attempt)
				if !release {
					counted++
				}
				mu.Unlock()
				err = l.Finish(ctx, step, failed(bg.Attempt, retry.ClassRetryable, "x"), ledger.FinishOptions{Counted: !release})
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs)

	// Numbers released while later ones were in flight are handed out
	// first; use them up, then the history must be gap-free.
	h, _, err := ls[0].History(ctx, step)
	require.NoError(t, err)
	top := slices.Max(numbers(h))
	for {
		bg, err := ls[0].Begin(ctx, step, "drain")
		require.NoError(t, err)
		if bg.Attempt > top {
			require.NoError(t, ls[0].Finish(ctx, step, retry.Attempt{Number: bg.Attempt}, ledger.FinishOptions{}))
			break
		}
		require.NoError(t, ls[0].Finish(ctx, step, failed(bg.Attempt, retry.ClassRetryable, "x"), ledger.FinishOptions{Counted: true}))
		counted++
	}

	h, st, err := ls[0].History(ctx, step)
	require.NoError(t, err)
	require.Len(t, h, counted)
	require.Equal(t, counted, st.Attempts)
	require.Equal(t, 0, st.InFlight)
	require.Equal(t, 0, st.Dropped)
	got := numbers(h)
	slices.Sort(got)
	want := make([]int, counted)
	for i := range want {
		want[i] = i + 1
	}
	require.Equal(t, want, got, "attempt numbers unique and contiguous")
	for _, a := range h {
		require.NotEqual(t, ledger.LostAttemptError, a.Error, "every lost record was replaced by its late finish")
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	for _, tc := range []struct {
		name string
		cfg  ledger.Config
		want string
	}{
		{"NoClient", ledger.Config{}, "invalid config: client: required"},
		{"BraceInPrefix", ledger.Config{Client: c, Prefix: "a{b"}, "invalid config: prefix: must not contain"},
		{"NegativeTTL", ledger.Config{Client: c, TTL: -time.Second}, "invalid config: ttl:"},
		{"NegativeMaxErrorLen", ledger.Config{Client: c, MaxErrorLen: -1}, "invalid config: max_error_len:"},
		{"NegativeMaxHistory", ledger.Config{Client: c, MaxHistory: -1}, "invalid config: max_history:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ledger.New(tc.cfg)
			require.ErrorIs(t, err, ledger.ErrInvalidConfig)
			require.True(t, strings.HasPrefix(err.Error(), tc.want), err.Error())
		})
	}
	_, err := ledger.New(ledger.Config{Client: c})
	require.NoError(t, err)
}

// TestRedisOutage stops a real redis-server under the ledger: calls fail
// fast with ErrUnavailable, and work again once it is back.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)
	c := redis.NewClient(&redis.Options{
		Addr:          r.Addr,
		DialTimeout:   100 * time.Millisecond,
		ReadTimeout:   100 * time.Millisecond,
		WriteTimeout:  100 * time.Millisecond,
		DialerRetries: 1,
		MaxRetries:    1,
	})
	t.Cleanup(func() { _ = c.Close() })
	l, err := ledger.New(ledger.Config{Client: c, Prefix: "test:outage"})
	require.NoError(t, err)
	ctx := t.Context()

	bg, err := l.Begin(ctx, step, "req")
	require.NoError(t, err)
	require.Equal(t, 1, bg.Attempt)
	require.NoError(t, l.Ping(ctx))

	r.Stop()
	calls := map[string]func() error{
		"Begin": func() error { _, err := l.Begin(ctx, step, "req"); return err },
		"Finish": func() error {
			return l.Finish(ctx, step, failed(1, retry.ClassRetryable, "x"), ledger.FinishOptions{Counted: true})
		},
		"History": func() error { _, _, err := l.History(ctx, step); return err },
		"Ping":    func() error { return l.Ping(ctx) },
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		require.ErrorIs(t, err, ledger.ErrUnavailable, name)
		require.Less(t, time.Since(start), 2*time.Second, name)
	}

	r.Restart(t)
	// The pool's dial circuit breaker may hold on to the last dial error
	// for up to a second after the server is back.
	require.Eventually(t, func() bool { return l.Ping(ctx) == nil }, 5*time.Second, 20*time.Millisecond)
	bg, err = l.Begin(ctx, step, "req")
	require.NoError(t, err)
	// The test server keeps nothing across a restart (no persistence), so
	// the step starts over; a production Redis keeps AOF on.
	require.Equal(t, 1, bg.Attempt)
	require.NoError(t, l.Finish(ctx, step, failed(1, retry.ClassRetryable, "x"), ledger.FinishOptions{Counted: true}))
}

// testLeases walks the lease lifecycle: granted, busy for others, renewed,
// lost (expired or taken over), and a stale holder's Finish refused.
func testLeases(t *testing.T, b backend) {
	leaseKey := func(s *setup, k ledger.StepKey) string {
		return s.cfg.Prefix + ":{" + k.TaskID + "}:" + k.Step + ":lease"
	}
	const ttl = 10 * time.Second
	t.Run("BusyWhileHeld", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		first, err := s.l.Begin(s.ctx, step, "req", ledger.WithLease(ttl))
		require.NoError(t, err)
		require.Equal(t, 1, first.Attempt)
		require.Equal(t, ledger.Lease{Key: step, Token: 1, Attempt: 1}, first.Lease)

		second, err := s.l.Begin(s.ctx, step, "req-again", ledger.WithLease(ttl))
		require.NoError(t, err)
		require.True(t, second.Busy)
		require.Equal(t, 1, second.BusyAttempt)
		require.Greater(t, second.BusyFor, time.Duration(0))
		require.LessOrEqual(t, second.BusyFor, ttl)
		_, st := s.history(t, step)
		require.Equal(t, 0, st.Attempts, "a busy Begin records nothing as lost")
		require.Equal(t, 1, st.InFlight)
	})
	t.Run("ExpiredLeaseIsLostAndItsHolderFenced", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		old, err := s.l.Begin(s.ctx, step, "req", ledger.WithLease(ttl))
		require.NoError(t, err)
		require.NoError(t, s.client.Del(s.ctx, leaseKey(s, step)).Err()) // the lease ran out
		require.ErrorIs(t, s.l.Renew(s.ctx, []ledger.Lease{old.Lease}, ttl)[0], ledger.ErrLeaseLost)

		cur, err := s.l.Begin(s.ctx, step, "req", ledger.WithLease(ttl))
		require.NoError(t, err)
		require.Equal(t, 2, cur.Attempt)
		require.Equal(t, 1, cur.Lost, "only an expired lease makes an attempt lost")
		require.Greater(t, cur.Lease.Token, old.Lease.Token)

		// The old holder wakes: its Finish is refused and writes nothing.
		err = s.l.Finish(s.ctx, step, failed(1, retry.ClassTerminal, "late"),
			ledger.FinishOptions{Counted: true, RequestID: "req", Lease: old.Lease})
		require.ErrorIs(t, err, ledger.ErrLeaseLost)
		err = s.l.Finish(s.ctx, step, failed(1, retry.ClassSucceeded, ""),
			ledger.FinishOptions{Counted: true, Succeeded: true, RequestID: "req", Lease: old.Lease})
		require.ErrorIs(t, err, ledger.ErrLeaseLost)
		h, st := s.history(t, step)
		require.False(t, st.Done, "a stale holder cannot mark the step done")
		require.Equal(t, ledger.LostAttemptError, h[0].Error)

		// The current holder renews and finishes; the lease is then free.
		require.NoError(t, s.l.Renew(s.ctx, []ledger.Lease{cur.Lease}, ttl)[0])
		require.NoError(t, s.l.Finish(s.ctx, step, failed(2, retry.ClassRetryable, "x"),
			ledger.FinishOptions{Counted: true, RequestID: "req", Lease: cur.Lease}))
		next, err := s.l.Begin(s.ctx, step, "req", ledger.WithLease(ttl))
		require.NoError(t, err)
		require.False(t, next.Busy)
		require.Equal(t, 3, next.Attempt)
		require.Equal(t, 0, next.Lost)
	})
	t.Run("RepeatedBeginWithItsKeyTakesItsAttemptOver", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		// The first call ran in Redis but its reply never arrived (a Redis
		// shutdown between the script and the reply): the caller asks again
		// with the same key, with the lease still live and after it ran out.
		lost, err := s.l.Begin(s.ctx, step, "req", ledger.WithLease(ttl), ledger.WithIdempotencyKey("replica-a.7.1"))
		require.NoError(t, err)
		require.True(t, lost.Fresh)
		again, err := s.l.Begin(s.ctx, step, "req", ledger.WithLease(ttl), ledger.WithIdempotencyKey("replica-a.7.1"))
		require.NoError(t, err)
		require.False(t, again.Busy, "its own lease does not make the step busy")
		require.Equal(t, 1, again.Attempt, "the same attempt, not a lost one and the next")
		require.Equal(t, 0, again.Lost)
		require.True(t, again.Fresh, "fresh as the first call found the step")
		require.True(t, again.Resumed)
		require.False(t, lost.Resumed)
		require.Greater(t, again.Lease.Token, lost.Lease.Token)
		require.NoError(t, s.client.Del(s.ctx, leaseKey(s, step)).Err()) // and once the lease ran out
		again, err = s.l.Begin(s.ctx, step, "req", ledger.WithLease(ttl), ledger.WithIdempotencyKey("replica-a.7.1"))
		require.NoError(t, err)
		require.Equal(t, 1, again.Attempt)
		require.Equal(t, 0, again.Lost)

		// The superseded token is fenced; the current one finishes.
		err = s.l.Finish(s.ctx, step, failed(1, retry.ClassRetryable, "stale"),
			ledger.FinishOptions{Counted: true, RequestID: "req", Lease: lost.Lease})
		require.ErrorIs(t, err, ledger.ErrLeaseLost)
		require.NoError(t, s.l.Finish(s.ctx, step, failed(1, retry.ClassRetryable, "x"),
			ledger.FinishOptions{Counted: true, RequestID: "req", Lease: again.Lease}))
		h, st := s.history(t, step)
		require.Equal(t, []int{1}, numbers(h))
		require.Equal(t, "x", h[0].Error)
		require.Equal(t, 0, st.InFlight)

		// A finished attempt's key is spent: the next Begin with it numbers
		// the next attempt.
		next, err := s.l.Begin(s.ctx, step, "req", ledger.WithLease(ttl), ledger.WithIdempotencyKey("replica-a.7.1"))
		require.NoError(t, err)
		require.Equal(t, 2, next.Attempt)
		require.False(t, next.Fresh)
		require.False(t, next.Resumed)
	})
	t.Run("OtherKeyFindsTheAttemptBusyThenLost", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		_, err := s.l.Begin(s.ctx, step, "req", ledger.WithLease(ttl), ledger.WithIdempotencyKey("replica-a.7.1"))
		require.NoError(t, err)
		for _, key := range []string{"replica-b.7.2", ""} {
			other, err := s.l.Begin(s.ctx, step, "req", ledger.WithLease(ttl), ledger.WithIdempotencyKey(key))
			require.NoError(t, err)
			require.True(t, other.Busy, "key %q", key)
		}
		require.NoError(t, s.client.Del(s.ctx, leaseKey(s, step)).Err())
		other, err := s.l.Begin(s.ctx, step, "req", ledger.WithLease(ttl), ledger.WithIdempotencyKey("replica-b.7.2"))
		require.NoError(t, err)
		require.Equal(t, 2, other.Attempt)
		require.Equal(t, 1, other.Lost, "another delivery cannot know the attempt never ran")
		require.False(t, other.Resumed)
		// The lost attempt's key went with it.
		again, err := s.l.Begin(s.ctx, step, "req", ledger.WithLease(ttl), ledger.WithIdempotencyKey("replica-a.7.1"))
		require.NoError(t, err)
		require.True(t, again.Busy)
		require.Equal(t, 2, again.BusyAttempt)
	})
	t.Run("RenewManyInOneCall", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		var leases []ledger.Lease
		for i := range 5 {
			k := ledger.StepKey{TaskID: fmt.Sprintf("task-%d", i), Step: "s"}
			bg, err := s.l.Begin(s.ctx, k, "req", ledger.WithLease(ttl))
			require.NoError(t, err)
			leases = append(leases, bg.Lease)
		}
		require.NoError(t, s.client.Del(s.ctx, leaseKey(s, leases[2].Key)).Err())
		errs := s.l.Renew(s.ctx, leases, time.Minute)
		for i, err := range errs {
			if i == 2 {
				require.ErrorIs(t, err, ledger.ErrLeaseLost)
				continue
			}
			require.NoError(t, err)
			pttl, err := s.client.PTTL(s.ctx, leaseKey(s, leases[i].Key)).Result()
			require.NoError(t, err)
			require.Greater(t, pttl, ttl, "renewed to the new TTL")
		}
	})
	t.Run("LeaseExpiresOnRedisClock", func(t *testing.T) {
		if !b.real {
			t.Skip("miniredis TTLs do not run down by themselves")
		}
		t.Parallel()
		s := newSetup(t, b, nil)
		_, err := s.l.Begin(s.ctx, step, "req", ledger.WithLease(100*time.Millisecond))
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			bg, err := s.l.Begin(s.ctx, step, "req", ledger.WithLease(time.Second))
			return err == nil && !bg.Busy && bg.Attempt == 2 && bg.Lost == 1
		}, 5*time.Second, 20*time.Millisecond)
	})
	t.Run("FloorAppliesToAFreshStepOnly", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		bg, err := s.l.Begin(s.ctx, step, "req", ledger.WithFloor(3))
		require.NoError(t, err)
		require.True(t, bg.Fresh)
		require.Equal(t, 3, bg.Attempt)
		s.finish(t, step, failed(3, retry.ClassRetryable, "x"), ledger.FinishOptions{Counted: true})
		bg, err = s.l.Begin(s.ctx, step, "req", ledger.WithFloor(9))
		require.NoError(t, err)
		require.False(t, bg.Fresh)
		require.Equal(t, 4, bg.Attempt)
	})
	t.Run("EpochIsStableUntilTheDataIsLost", func(t *testing.T) {
		t.Parallel()
		clock := &fixedClock{now: time.UnixMilli(1_700_000_000_000)}
		s := newSetup(t, b, func(c *ledger.Config) { c.Now = clock.Now })
		e1, err := s.l.Epoch(s.ctx)
		require.NoError(t, err)
		clock.Advance(time.Minute)
		e2, err := s.l.Epoch(s.ctx)
		require.NoError(t, err)
		require.Equal(t, e1, e2)
		require.NoError(t, s.client.Del(s.ctx, s.cfg.Prefix+":epoch").Err()) // what FLUSHALL does to it
		e3, err := s.l.Epoch(s.ctx)
		require.NoError(t, err)
		require.Equal(t, e1.Add(time.Minute), e3)
	})
}
