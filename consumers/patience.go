package consumers

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A cluster that loses the leader of a stream answers for a few seconds
// with errors that say "not now", not "no": the terminal records are
// written and read across such a failover patiently, so completed work is
// recorded afterwards instead of given back to run again.
const (
	// recordPatience bounds how long one terminal record is written, or
	// read before an attempt, across a failover.
	recordPatience = 60 * time.Second
	// patienceTry bounds one try, so a request lost with a dead server
	// is sent again to the new one.
	patienceTry = 5 * time.Second
	// patienceFirstWait and patienceMaxWait space the tries.
	patienceFirstWait = 250 * time.Millisecond
	patienceMaxWait   = 2 * time.Second
)

// transientCodes are the JetStream API errors of a stream or cluster
// between leaders (nats-server's errors.json).
var transientCodes = map[jetstream.ErrorCode]bool{
	10008: true, // JSClusterNotAvailErr: JetStream system temporarily unavailable
	10004: true, // JSClusterIncompleteErr: incomplete results
	10163: true, // JSStreamExpectedLastSeqPerSubjectNotReady
}

// transient reports whether err is one a failover explains and a later
// try may not meet: no leader yet, no responder, or a try that timed out.
func transient(err error) bool {
	if err == nil {
		return false // before apiErr, which errors.As moves to the heap
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return transientCodes[apiErr.ErrorCode]
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrDisconnected)
}

// patiently runs op, each try bounded by patienceTry, until it succeeds,
// fails for a reason that is not transient, ctx ends or patience has
// passed since the call; it returns the last try's error. Its only
// context per try is the try's own: a call that succeeds at once, as
// nearly every record write does, costs one timer, not one for the
// patience and one for the try.
func patiently(ctx context.Context, patience time.Duration, op func(context.Context) error) error {
	giveUp := time.Now().Add(patience)
	wait := patienceFirstWait
	for {
		tctx, cancel := context.WithDeadline(ctx, earliest(giveUp, time.Now().Add(patienceTry)))
		err := op(tctx)
		cancel()
		left := time.Until(giveUp)
		if !transient(err) || ctx.Err() != nil || left <= 0 {
			return err
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, patienceMaxWait)
	}
}

// earliest is the sooner of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
