package consumers_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// A handler runs directly under the attempt's goroutine entry: the stages
// before it ran elsewhere and those after it run from a deferred call, so
// a parked handler's stack holds the handler and one frame of personaq's.
// With thousands of slow requests in flight, that keeps a shallow handler
// on the runtime's smallest stack (BenchmarkSlowInFlight's stack_MB).
func TestHandlerRunsDirectlyUnderItsGoroutine(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	frames := make(chan []string, 1)
	h.start(persona("shallow", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		pc := make([]uintptr, 32)
		n := runtime.Callers(2, pc) // above this function
		var names []string
		fs := runtime.CallersFrames(pc[:n])
		for {
			f, more := fs.Next()
			names = append(names, f.Function[strings.LastIndexByte(f.Function, '/')+1:])
			if !more {
				break
			}
		}
		frames <- names
		return handlers.Result{}, nil
	}), fastPolicy(1)))
	req := h.publish("shallow", "t-stack")
	require.Equal(t, schemas.OutcomeSucceeded, out.wait(t, req.RequestID, 10*time.Second).Outcome)
	require.Equal(t, []string{"consumers.(*Runtime).invokeApart", "runtime.goexit"}, <-frames)
}
