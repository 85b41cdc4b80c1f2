package loop_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/personaq/personaq/consumers/loop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitClosed fails the test when ch is not closed within a second.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatalf("%s: not within 1s", what)
	}
}

// blocker is a loop that runs until its context ends, then takes a moment
// to return, so a Stop that did not wait would be seen returning early.
type blocker struct {
	started, returned chan struct{}
	once              sync.Once
}

func newBlocker() *blocker {
	return &blocker{started: make(chan struct{}), returned: make(chan struct{})}
}

func (b *blocker) run(ctx context.Context) {
	b.once.Do(func() { close(b.started) })
	<-ctx.Done()
	time.Sleep(20 * time.Millisecond)
	close(b.returned)
}

func (b *blocker) hasReturned() bool {
	select {
	case <-b.returned:
		return true
	default:
		return false
	}
}

func TestGroupLifecycle(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(t *testing.T, g *loop.Group, b *blocker)
	}{
		{"StopWaitsForEveryLoop", func(t *testing.T, g *loop.Group, b *blocker) {
			other := newBlocker()
			require.True(t, g.Start(context.Background(), b.run, other.run))
			waitClosed(t, b.started, "first loop start")
			waitClosed(t, other.started, "second loop start")
			g.Stop()
			require.True(t, b.hasReturned() && other.hasReturned(), "Stop returned before its loops")
		}},
		{"StopIsIdempotent", func(t *testing.T, g *loop.Group, b *blocker) {
			require.True(t, g.Start(context.Background(), b.run))
			g.Stop()
			g.Stop()
			require.True(t, b.hasReturned())
		}},
		{"ConcurrentStopsAllWait", func(t *testing.T, g *loop.Group, b *blocker) {
			require.True(t, g.Start(context.Background(), b.run))
			waitClosed(t, b.started, "loop start")
			var wg sync.WaitGroup
			var early atomic.Int32
			for range 4 {
				wg.Go(func() {
					g.Stop()
					if !b.hasReturned() {
						early.Add(1)
					}
				})
			}
			wg.Wait()
			require.Zero(t, early.Load(), "a concurrent Stop returned before the loop")
		}},
		{"StopBeforeStartIsANoOp", func(t *testing.T, g *loop.Group, b *blocker) {
			g.Stop()
			require.True(t, g.Start(context.Background(), b.run), "a Stop before Start must not use the Group up")
			waitClosed(t, b.started, "loop start after an early Stop")
			g.Stop()
			require.True(t, b.hasReturned())
		}},
		{"SecondStartRunsNothing", func(t *testing.T, g *loop.Group, b *blocker) {
			require.True(t, g.Start(context.Background(), b.run))
			var ran atomic.Bool
			require.False(t, g.Start(context.Background(), func(context.Context) { ran.Store(true) }))
			g.Stop()
			require.False(t, ran.Load(), "the second Start ran its loop")
		}},
		{"CallersContextEndsTheLoops", func(t *testing.T, g *loop.Group, b *blocker) {
			ctx, cancel := context.WithCancel(context.Background())
			require.True(t, g.Start(ctx, b.run))
			cancel()
			waitClosed(t, b.returned, "loop end on the caller's cancel")
			g.Wait()
		}},
		{"LoopsKeepTheCallersValues", func(t *testing.T, g *loop.Group, b *blocker) {
			type key struct{}
			got := make(chan any, 1)
			ctx := context.WithValue(context.Background(), key{}, "v")
			require.True(t, g.Start(ctx, func(ctx context.Context) { got <- ctx.Value(key{}) }))
			g.Wait()
			require.Equal(t, "v", <-got)
		}},
		{"WaitDoesNotStopTheLoops", func(t *testing.T, g *loop.Group, b *blocker) {
			require.True(t, g.Start(context.Background(), b.run))
			waited := make(chan struct{})
			go func() { g.Wait(); close(waited) }()
			select {
			case <-waited:
				t.Fatal("Wait returned while the loop still ran")
			case <-time.After(50 * time.Millisecond):
			}
			g.Stop()
			waitClosed(t, waited, "Wait after Stop")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, &loop.Group{}, newBlocker())
		})
	}
}

var errBoom = errors.New("boom")

func TestGroupPanicIsNotSwallowed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		value any
		isErr bool
	}{
		{"ErrorValue", errBoom, true},
		{"StringValue", "boom", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			heard := make(chan *loop.PanicError, 1)
			g := &loop.Group{OnPanic: func(p *loop.PanicError) { heard <- p }}
			sibling := newBlocker()
			require.True(t, g.Start(context.Background(), sibling.run, func(context.Context) { panic(tt.value) }))

			var p *loop.PanicError
			select {
			case p = <-heard:
			case <-time.After(time.Second):
				t.Fatal("OnPanic not called")
			}
			require.Equal(t, tt.value, p.Value)
			require.Contains(t, string(p.Stack), "loop_test.go", "the stack is the panicking loop's")
			require.Equal(t, tt.isErr, errors.Is(p, errBoom))
			waitClosed(t, sibling.returned, "the sibling's end after the panic")

			for range 2 { // every Stop says so, not only the first
				func() {
					defer func() {
						got, ok := recover().(*loop.PanicError)
						require.True(t, ok, "Stop did not panic with a *PanicError")
						require.Same(t, p, got)
					}()
					g.Stop()
				}()
			}
		})
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		ctx    func() (context.Context, context.CancelFunc)
		d      time.Duration
		want   bool
		maxDur time.Duration
	}{
		{"ZeroWithLiveContext", live, 0, true, 50 * time.Millisecond},
		{"NegativeWithEndedContext", func() (context.Context, context.CancelFunc) { return ended, func() {} }, -time.Second, false, 50 * time.Millisecond},
		{"FullWait", live, 20 * time.Millisecond, true, time.Second},
		{"ContextEndsFirst", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 10*time.Millisecond)
		}, time.Hour, false, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := tt.ctx()
			defer cancel()
			began := time.Now()
			require.Equal(t, tt.want, loop.Sleep(ctx, tt.d))
			took := time.Since(began)
			require.Less(t, took, tt.maxDur)
			if tt.want {
				require.GreaterOrEqual(t, took, tt.d)
			}
		})
	}
}

func live() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }

func TestEveryRunsUntilItsContextEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	third := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop.Every(ctx, 5*time.Millisecond, func() {
			if calls.Add(1) == 3 {
				close(third)
			}
		})
	}()
	waitClosed(t, third, "three calls")
	cancel()
	waitClosed(t, done, "Every's end")
	n := calls.Load()
	time.Sleep(20 * time.Millisecond) // would be three more calls if it went on
	require.Equal(t, n, calls.Load(), "Every called fn after its context ended")
}

// crashEnv makes the test binary run crashingGroup instead of its tests.
const crashEnv = "LOOP_TEST_CRASH"

func init() {
	if os.Getenv(crashEnv) == "1" {
		crashingGroup()
	}
}

// crashingGroup starts a loop that panics in a Group without OnPanic, and
// waits for it: the process must end with the panic, not here.
func crashingGroup() {
	var g loop.Group
	g.Start(context.Background(), func(context.Context) { panic("loop without OnPanic") })
	g.Wait()
	os.Exit(0)
}

// Without OnPanic a loop's panic ends the process at once, as any
// goroutine's does: nothing recovers it and runs on without the loop.
func TestGroupPanicWithoutOnPanicEndsTheProcess(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the process ended cleanly: %s", out)
	require.Equal(t, 2, exit.ExitCode(), "a Go panic exits with status 2")
	require.Contains(t, string(out), "panic: loop without OnPanic")
}
