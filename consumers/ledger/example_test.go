package ledger_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/retry"
)

func Example() {
	srv, err := miniredis.Run() // personaq dev; a real Redis in production
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer func() { _ = client.Close() }()

	l, err := ledger.New(ledger.Config{Client: client})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	key := ledger.StepKey{TaskID: "task-42", Step: "plan"}

	// Attempt 1 fails validation; the next attempt sees its error.
	b, _ := l.Begin(ctx, key, "req-1")
	_ = l.Finish(ctx, key, retry.Attempt{
		Number: b.Attempt, Role: retry.RolePrimary, Class: retry.ClassValidation,
		Error: "missing field \"plan\"",
	}, ledger.FinishOptions{Counted: true, RequestID: "req-1"})

	// Attempt 2 is snoozed: it does not burn an attempt.
	b, _ = l.Begin(ctx, key, "req-1")
	fmt.Println("attempt", b.Attempt, "history", len(b.History), "last error:", b.History[0].Error)
	_ = l.Finish(ctx, key, retry.Attempt{Number: b.Attempt, Class: retry.ClassSnooze}, ledger.FinishOptions{})

	// Attempt 2 again, and it succeeds.
	b, _ = l.Begin(ctx, key, "req-1")
	fmt.Println("attempt", b.Attempt, "after the snooze")
	_ = l.Finish(ctx, key, retry.Attempt{Number: b.Attempt, Role: retry.RoleFallback, Class: retry.ClassSucceeded},
		ledger.FinishOptions{Counted: true, Succeeded: true, RequestID: "req-1"})

	// A redelivery of the finished step is recognised.
	b, _ = l.Begin(ctx, key, "req-1")
	fmt.Println("done:", b.Done, b.DoneRequestID)

	hist, st, _ := l.History(ctx, key)
	for _, a := range hist {
		fmt.Printf("#%d %s %s %q\n", a.Number, a.Role, a.Class, a.Error)
	}
	fmt.Println("attempts:", st.Attempts, "in flight:", st.InFlight)
	// Output:
	// attempt 2 history 1 last error: missing field "plan"
	// attempt 2 after the snooze
	// done: true req-1
	// #1 primary validation "missing field \"plan\""
	// #2 fallback succeeded ""
	// attempts: 2 in flight: 0
}

// A Begin whose reply never came back (Redis ran it, then shut down or the
// connection dropped) is asked again under the same idempotency key: the
// attempt it opened is resumed, not recorded as lost, because its handler
// never ran.
func ExampleWithIdempotencyKey() {
	srv, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer func() { _ = client.Close() }()
	l, err := ledger.New(ledger.Config{Client: client})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	key := ledger.StepKey{TaskID: "task-42", Step: "plan"}
	// One key per delivery of the request's message: this process's own
	// prefix, the stream sequence and the delivery count.
	delivery := ledger.WithIdempotencyKey("3f9c2a71.1042.1")

	_, _ = l.Begin(ctx, key, "req-1", ledger.WithLease(time.Minute), delivery) // its reply is lost
	b, _ := l.Begin(ctx, key, "req-1", ledger.WithLease(time.Minute), delivery)
	fmt.Println("attempt", b.Attempt, "resumed:", b.Resumed, "lost:", b.Lost)

	// Another delivery finds the attempt's lease held.
	other, _ := l.Begin(ctx, key, "req-1", ledger.WithLease(time.Minute), ledger.WithIdempotencyKey("3f9c2a71.1042.2"))
	fmt.Println("busy:", other.Busy)
	// Output:
	// attempt 1 resumed: true lost: 0
	// busy: true
}
