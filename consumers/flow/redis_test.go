package flow_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/flow"
	"github.com/personaq/personaq/integration/testenv"
)

func newLimiter(t *testing.T, limits map[string]flow.Limit) *flow.Limiter {
	t.Helper()
	r := testenv.StartRedis(t)
	l, err := flow.NewLimiter(flow.LimiterConfig{Client: r.Client(t), Limits: limits})
	require.NoError(t, err)
	return l
}

func TestLimiterAdmitsBurstThenSpacesRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLimiter(t, map[string]flow.Limit{"gpt": {RequestsPerMinute: 600, Burst: 5}}) // 10/s
	g, err := l.Acquire(ctx, "gpt", 8)
	require.NoError(t, err)
	require.Equal(t, 5, g.N, "the burst is admitted at once, no more")
	g, err = l.Acquire(ctx, "gpt", 1)
	require.NoError(t, err)
	require.Zero(t, g.N)
	require.False(t, g.CoolingDown)
	require.Positive(t, g.Wait)
	require.LessOrEqual(t, g.Wait, 100*time.Millisecond, "one request every 100ms")
	require.NoError(t, l.Release(ctx, "gpt", 2), "two admitted requests found nothing to pull")
	g, err = l.Acquire(ctx, "gpt", 8)
	require.NoError(t, err)
	require.GreaterOrEqual(t, g.N, 2, "what was given back is admitted again")
	require.Less(t, g.N, 8)
}

func TestLimiterSharedRate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLimiter(t, map[string]flow.Limit{"gpt": {RequestsPerMinute: 6000, Burst: 1}}) // 100/s
	// Four "replicas" pull as fast as the limiter lets them for 500ms.
	var mu sync.Mutex
	admitted := 0
	start := time.Now()
	deadline := start.Add(500 * time.Millisecond)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				g, err := l.Acquire(ctx, "gpt", 4)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				admitted += g.N
				mu.Unlock()
				if g.N == 0 {
					time.Sleep(g.Wait) // the caller's wait, as the pull loop does
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	// Never more than the limit across every caller: 100/s plus the burst
	// of 1 (Redis's clock and ours may differ by a request's worth). Under
	// load the callers may use less of it.
	require.LessOrEqual(t, admitted, 2+int(took.Seconds()*100))
	require.GreaterOrEqual(t, admitted, 10)
}

func TestLimiterTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// 60000 tokens/minute = 1000/s; each request reserves 500; burst 1000.
	l := newLimiter(t, map[string]flow.Limit{"claude": {TokensPerMinute: 60000, EstimatedTokens: 500}})
	g, err := l.Acquire(ctx, "claude", 5)
	require.NoError(t, err)
	require.Equal(t, 2, g.N)
	g, err = l.Acquire(ctx, "claude", 1)
	require.NoError(t, err)
	require.Zero(t, g.N)
	require.Positive(t, g.Wait)
	require.LessOrEqual(t, g.Wait, 500*time.Millisecond, "500 tokens refill in 500ms")
	// Both requests used 100 tokens, not 500: 800 tokens come back.
	require.NoError(t, l.Settle(ctx, "claude", 500, 100))
	require.NoError(t, l.Settle(ctx, "claude", 500, 100))
	g, err = l.Acquire(ctx, "claude", 5)
	require.NoError(t, err)
	require.GreaterOrEqual(t, g.N, 1, "800 tokens back: one more estimate of 500 fits")
	// A request that used far more than its estimate pushes the next start out.
	require.NoError(t, l.Settle(ctx, "claude", 500, 2500))
	g, err = l.Acquire(ctx, "claude", 1)
	require.NoError(t, err)
	require.Zero(t, g.N)
	require.Greater(t, g.Wait, 2*time.Second)
}

func TestLimiterCoolDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLimiter(t, map[string]flow.Limit{"gpt": {RequestsPerMinute: 60000, CoolDown: 300 * time.Millisecond}})
	cd, err := l.CoolDown(ctx, "gpt", 2*time.Second)
	require.NoError(t, err)
	require.True(t, cd.Started)
	require.InDelta(t, 2*time.Second, cd.Remaining, float64(50*time.Millisecond))
	cd, err = l.CoolDown(ctx, "gpt", time.Second)
	require.NoError(t, err)
	require.False(t, cd.Started, "a 429 during the cool-down does not start another")
	require.Greater(t, cd.Remaining, time.Second+900*time.Millisecond, "and never shortens it")
	g, err := l.Acquire(ctx, "gpt", 3)
	require.NoError(t, err)
	require.Zero(t, g.N)
	require.True(t, g.CoolingDown)
	require.Greater(t, g.Wait, time.Second)
	left, err := l.Cooling(ctx, "gpt")
	require.NoError(t, err)
	require.Greater(t, left, time.Second)

	l2 := newLimiter(t, map[string]flow.Limit{"gpt": {RequestsPerMinute: 60000, CoolDown: 300 * time.Millisecond}})
	cd, err = l2.CoolDown(ctx, "gpt", 0)
	require.NoError(t, err)
	require.InDelta(t, 300*time.Millisecond, cd.Remaining, float64(20*time.Millisecond), "no wait named: the limit's cool-down")
	require.Eventually(t, func() bool {
		g, err := l2.Acquire(ctx, "gpt", 1)
		return err == nil && g.N == 1
	}, 5*time.Second, 20*time.Millisecond, "requests start again once the cool-down is over")
	_, err = l2.Acquire(ctx, "nope", 1)
	require.ErrorIs(t, err, flow.ErrUnknownLimiter)
}

func TestCircuitsLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := testenv.StartRedis(t)
	c, err := flow.NewCircuits(r.Client(t), "")
	require.NoError(t, err)
	cool := 300 * time.Millisecond

	st, err := c.Status(ctx, "planner")
	require.NoError(t, err)
	require.Equal(t, flow.Closed, st.State)

	opened, st, err := c.Open(ctx, "planner", cool, 5)
	require.NoError(t, err)
	require.True(t, opened)
	require.Equal(t, flow.Open, st.State)
	opened, _, err = c.Open(ctx, "planner", cool, 7)
	require.NoError(t, err)
	require.False(t, opened, "a second replica tripping finds it open")

	granted, st, err := c.Probe(ctx, "planner", "a", time.Minute, cool)
	require.NoError(t, err)
	require.False(t, granted, "no probe before the cool-down ends")
	require.Equal(t, flow.Open, st.State)

	require.Eventually(t, func() bool {
		granted, _, err = c.Probe(ctx, "planner", "a", time.Minute, cool)
		return err == nil && granted
	}, 5*time.Second, 20*time.Millisecond)
	granted, st, err = c.Probe(ctx, "planner", "b", time.Minute, cool)
	require.NoError(t, err)
	require.False(t, granted, "exactly one prober")
	require.Equal(t, flow.HalfOpen, st.State)

	ok, err := c.Close(ctx, "planner", "b")
	require.NoError(t, err)
	require.False(t, ok, "only the prober decides")
	ok, st, err = c.Reopen(ctx, "planner", "a", cool)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 6, st.Failures)
	st, err = c.Status(ctx, "planner")
	require.NoError(t, err)
	require.Equal(t, flow.Open, st.State)

	require.Eventually(t, func() bool {
		granted, _, err = c.Probe(ctx, "planner", "b", 50*time.Millisecond, cool)
		return err == nil && granted
	}, 5*time.Second, 20*time.Millisecond)
	// b's claim lapses (it died mid-probe): a takes the probe over.
	require.Eventually(t, func() bool {
		granted, _, err = c.Probe(ctx, "planner", "a", time.Minute, cool)
		return err == nil && granted
	}, 5*time.Second, 10*time.Millisecond)
	ok, err = c.Close(ctx, "planner", "a")
	require.NoError(t, err)
	require.True(t, ok)
	st, err = c.Status(ctx, "planner")
	require.NoError(t, err)
	require.Equal(t, flow.Closed, st.State)
}
