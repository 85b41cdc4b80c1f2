package ledger

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/rdb"
	"github.com/personaq/personaq/integration/testenv"
)

// echoScript counts its calls in KEYS[1] and returns ARGV[1].
var echoScript = redis.NewScript(`
redis.call('INCR', KEYS[1])
return ARGV[1]
`)

// runPipe calls echoScript through p from workers goroutines, calls times
// each, and checks that every call got its own reply.
func runPipe(t *testing.T, p *pipe, workers, calls int, ctxFor func(w, i int) (context.Context, context.CancelFunc)) (ok, gaveUp int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				ctx, cancel := ctxFor(w, i)
				want := strconv.Itoa(w) + "/" + strconv.Itoa(i)
				got, err := p.run(ctx, echoScript, []string{"calls"}, want).Text()
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					ok++
					if got != want {
						t.Errorf("call %s got the reply %q", want, got)
					}
				case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
					gaveUp++
				default:
					t.Errorf("call %s: %v", want, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return ok, gaveUp
}

func background(int, int) (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

func TestPipe(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)

	t.Run("ConcurrentCallsGetTheirOwnReplies", func(t *testing.T) {
		c := r.Client(t)
		p := &pipe{client: c}
		require.NoError(t, c.Del(t.Context(), "calls").Err())
		ok, gaveUp := runPipe(t, p, 64, 50, background)
		require.Equal(t, 64*50, ok)
		require.Zero(t, gaveUp)
		n, err := c.Get(t.Context(), "calls").Int()
		require.NoError(t, err)
		require.Equal(t, 64*50, n, "every call ran exactly once")
		require.False(t, p.busy, "the pipe is idle after the last batch")
		require.Empty(t, p.queue)
	})

	t.Run("ScriptsLoadedAgainAfterFlush", func(t *testing.T) {
		// A batch that meets NOSCRIPT resends, with the scripts' bodies, only the
		// calls that did not run.
		c := r.Client(t)
		p := &pipe{client: c}
		for round := range 5 {
			require.NoError(t, c.Del(t.Context(), "calls").Err())
			require.NoError(t, c.ScriptFlush(t.Context()).Err())
			ok, _ := runPipe(t, p, 32, 4, background)
			require.Equal(t, 32*4, ok, "round %d", round)
			n, err := c.Get(t.Context(), "calls").Int()
			require.NoError(t, err)
			require.Equal(t, 32*4, n, "round %d: every call ran exactly once", round)
		}
	})

	t.Run("CallersGivingUpLeaveNoBatchBehind", func(t *testing.T) {
		// Callers whose deadline passes while queued return at once; the
		// rest are still served and the pipe ends idle (no lost sender).
		c := r.Client(t)
		p := &pipe{client: c}
		short := func(w, i int) (context.Context, context.CancelFunc) {
			if w%2 == 0 {
				return context.WithTimeout(context.Background(), time.Duration(i%3)*50*time.Microsecond)
			}
			return context.WithCancel(context.Background())
		}
		ok, gaveUp := runPipe(t, p, 64, 40, short)
		require.Equal(t, 64*40, ok+gaveUp)
		require.GreaterOrEqual(t, ok, 32*40, "callers without a deadline are all served")
		require.False(t, p.busy)
		require.Empty(t, p.queue)
	})

	t.Run("QueuedCallerGivesUp", func(t *testing.T) {
		c := r.Client(t)
		p := &pipe{client: c, busy: true} // a batch is in flight
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		err := p.run(ctx, echoScript, []string{"calls"}, "x").Err()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Empty(t, p.queue, "a caller that gave up leaves the queue")
	})
}

func TestPipeSendReloadsScriptsInABatch(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)
	c := r.Client(t)
	p := &pipe{client: c}
	require.NoError(t, c.ScriptFlush(t.Context()).Err())
	soon := time.Now().Add(time.Minute)
	batch := []*call{
		{Call: rdb.Call{Script: echoScript, Keys: []string{"calls"}, Args: []any{"a"}}, deadline: soon},
		{Call: rdb.Call{Script: echoScript, Keys: []string{"calls"}, Args: []any{"b"}}},
		{Call: rdb.Call{Script: echoScript, Keys: []string{"calls"}, Args: []any{"c"}}, deadline: soon.Add(time.Second)},
	}
	p.send(t.Context(), batch)
	for i, want := range []string{"a", "b", "c"} {
		got, err := batch[i].Cmd.Text()
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	n, err := c.Get(t.Context(), "calls").Int()
	require.NoError(t, err)
	require.Equal(t, 3, n, "each call ran once: NOSCRIPT calls did not run the first time")
}

func TestNewPipeSendsDirectlyOnCluster(t *testing.T) {
	t.Parallel()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = cc.Close() })
	require.True(t, newPipe(cc).direct)
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	require.False(t, newPipe(c).direct)
}
