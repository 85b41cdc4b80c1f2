package saga

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// Report is the outcome of one sweep.
type Report struct {
	// Recovered lists the sagas compensated by this sweep.
	Recovered []string `json:"recovered"`
	// Errors has one entry per saga quarantined by this sweep (naming the
	// saga, the kind and target, and the error), and per compensation
	// message that was itself invalid.
	Errors []string `json:"errors"`
	// Retrying has one entry per saga still RUNNING when the sweep stopped
	// waiting for scheduled retries (its bound was hit): they run later.
	Retrying []string `json:"retrying,omitempty"`
}

// Failed reports whether any saga failed (a CLI exits non-zero).
func (r *Report) Failed() bool { return len(r.Errors) > 0 }

// Unfinished reports whether retries were still scheduled at the end.
func (r *Report) Unfinished() bool { return len(r.Retrying) > 0 }

// outcome is what one delivery ended as, for a sweep's report.
type outcome struct {
	compensated string // the saga compensated
	failure     string // a Report.Errors entry
}

func (r *Report) add(o outcome) {
	if o.compensated != "" {
		r.Recovered = append(r.Recovered, o.compensated)
	}
	if o.failure != "" {
		r.Errors = append(r.Errors, o.failure)
	}
}

// settleWait is how long a sweep waits for a request once a pull found
// none: the consumer learns of a request published a moment ago (and counts
// it pending) asynchronously.
const settleWait = 200 * time.Millisecond

// DefaultMaxWait is how long Sweep waits for scheduled retries by default.
const DefaultMaxWait = 2 * time.Minute

// Sweep runs every pending compensation request to its end and returns when
// nothing is pending and no retry is scheduled (the consumer's NumPending
// and NumAckPending are both 0), or when maxWait (<= 0: DefaultMaxWait) has
// passed while retries were still scheduled: Report.Retrying then names
// those sagas. Retries come back through the broker's redelivery after the
// policy's delay, like in the runtime's background loop. It returns an error
// only when it could not sweep at all, or ctx ended (the report then holds
// what was done; a request cut short is handed back, its saga RUNNING).
//
// When the queue is empty, a saga still RUNNING has no request left to run
// it (recorded by an earlier version that took requests in before running
// them): Sweep queues its request again, once.
func (r *Runner) Sweep(ctx context.Context, maxWait time.Duration) (*Report, error) {
	rep := &Report{Recovered: []string{}, Errors: []string{}}
	if maxWait <= 0 {
		maxWait = DefaultMaxWait
	}
	q, err := r.open(ctx)
	if err != nil {
		return rep, err
	}
	deadline := time.Now().Add(maxWait)
	resumed := false
	for wait := settleWait; ctx.Err() == nil; {
		n, err := q.pull(ctx, wait, rep.add)
		if err != nil {
			return rep, err
		}
		if n > 0 {
			wait = settleWait
			continue
		}
		busy, err := q.busy(ctx)
		switch {
		case err != nil:
			return rep, err
		case !busy && !resumed:
			resumed = true
			if k, err := q.resume(ctx); err != nil || k == 0 {
				return rep, err
			}
		case !busy:
			return rep, nil
		case !time.Now().Before(deadline):
			rep.Retrying, err = q.retrying(ctx)
			return rep, err
		default:
			wait = max(min(pollWait, time.Until(deadline)), 10*time.Millisecond)
		}
	}
	return rep, ctx.Err()
}

// busy reports whether requests are pending or held (scheduled retries).
func (q *queue) busy(ctx context.Context) (bool, error) {
	info, err := q.cons.Info(ctx)
	if err != nil {
		return false, fmt.Errorf("compensation consumer %s: %w", q.r.topo.Durable, err)
	}
	return info.NumPending+uint64(info.NumAckPending) > 0, nil
}

// resume queues again the request of every saga left RUNNING (or
// QUARANTINED without its record) with no request in the queue.
func (q *queue) resume(ctx context.Context) (int, error) {
	sagas, err := list(ctx, q.kv)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, sg := range sagas {
		if sg.Request == nil || (sg.State != Running && (sg.State != Quarantined || sg.QuarantineSeq != 0)) {
			continue
		}
		msg := &nats.Msg{Subject: q.r.topo.Subject(sg.Kind), Data: sg.Payload, Header: nats.Header{}}
		if len(msg.Data) == 0 {
			msg.Data, _ = schemas.Encode(sg.Request)
		}
		for k, v := range sg.Headers {
			msg.Header[k] = append([]string(nil), v...)
		}
		msg.Header.Set(jetstream.MsgIDHeader, resumeMsgID(sg.Request.RequestID, sg.Revision))
		msg.Header.Set(schemas.HeaderSaga, sg.ID)
		if _, err := q.r.js.PublishMsg(ctx, msg); err != nil {
			return n, fmt.Errorf("queue saga %s again: %w", sg.ID, err)
		}
		q.r.log.Info().Str("saga_id", sg.ID).Str("state", string(sg.State)).Msg("saga without a queued request: its request is queued again")
		n++
	}
	return n, nil
}

// retrying describes the sagas still RUNNING.
func (q *queue) retrying(ctx context.Context) ([]string, error) {
	sagas, err := list(ctx, q.kv)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, sg := range sagas {
		if sg.State != Running {
			continue
		}
		e := fmt.Sprintf("saga %s: %s %s: %d of %d attempts made", sg.ID, sg.Kind, sg.Target, sg.Attempts, q.r.policy(sg.Kind).MaxAttempts)
		if k := len(sg.Errors); k > 0 {
			e += fmt.Sprintf(", last failed %s ago: %s", q.r.now().Sub(sg.Errors[k-1].At).Round(time.Second), sg.Errors[k-1].Error)
		}
		out = append(out, e)
	}
	return out, nil
}
