package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

type cancelOptions struct {
	by string
}

// CancelOption configures Cancel and CancelTask.
type CancelOption func(*cancelOptions)

// CancelledBy names who asks (kept in the cancelled record). Default:
// "client".
func CancelledBy(name string) CancelOption { return func(o *cancelOptions) { o.by = name } }

func cancelOpts(opts []CancelOption) cancelOptions {
	o := cancelOptions{by: "client"}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Cancel stops request id: queued, it never runs; waiting for a retry, it
// runs no further attempt; running, its attempt is stopped (its context
// cancelled with ErrCancelled as the cause, a command persona's process
// group signalled). It returns the cancelled terminal record. When the
// request had already ended, it returns the record that stands and an
// error matching ErrAlreadyEnded; when no request has this id, one
// matching ErrUnknownRequest.
func (c *Client) Cancel(ctx context.Context, id, reason string, opts ...CancelOption) (*schemas.OutcomeEvent, error) {
	o := cancelOpts(opts)
	if rec, err := c.Record(ctx, id); err == nil {
		return rec, fmt.Errorf("cancel request %s: %w as %s", id, ErrAlreadyEnded, rec.Outcome)
	} else if !errors.Is(err, wire.ErrNoOutcome) {
		return nil, err
	}
	can, err := c.describe(ctx, id)
	if err != nil {
		return nil, err
	}
	can.Reason, can.By = reason, o.by
	return wire.Cancel(ctx, c.js, c.topo, can)
}

// describe finds what the cancelled record says of request id: from its
// latest attempt event, else from the requests stream.
func (c *Client) describe(ctx context.Context, id string) (wire.Cancellation, error) {
	ev, err := wire.LatestAttempt(ctx, c.js, c.topo, id)
	if err != nil {
		return wire.Cancellation{}, err
	}
	if ev != nil {
		return wire.Cancellation{RequestID: id, Persona: ev.Persona, TaskID: ev.TaskID, Step: ev.Step,
			Attempts: ev.Attempt, CorrelationID: ev.CorrelationID}, nil
	}
	open, err := wire.FindOpen(ctx, c.js, c.topo, func(r *schemas.PersonaRequest) bool { return r.RequestID == id })
	if err != nil {
		return wire.Cancellation{}, err
	}
	if len(open) == 0 {
		return wire.Cancellation{}, fmt.Errorf("cancel request %s: %w", id, ErrUnknownRequest)
	}
	return wire.CancellationOf(open[0].Request, "", ""), nil
}

// TaskCancel is what CancelTask did.
type TaskCancel struct {
	// Cancelled are the records of the requests this call cancelled.
	Cancelled []*schemas.OutcomeEvent
	// AlreadyEnded are the records of open requests that ended (another
	// way) before their cancel was stored.
	AlreadyEnded []*schemas.OutcomeEvent
}

// CancelTask cancels every open request of task taskID, whatever its
// persona or step (a cancelled workflow cancels all its steps). A request
// that ended meanwhile keeps its record (TaskCancel.AlreadyEnded). It
// fails with the first error that is not ErrAlreadyEnded, after trying
// them all.
func (c *Client) CancelTask(ctx context.Context, taskID, reason string, opts ...CancelOption) (*TaskCancel, error) {
	o := cancelOpts(opts)
	open, err := wire.FindOpen(ctx, c.js, c.topo, func(r *schemas.PersonaRequest) bool { return r.TaskID == taskID })
	if err != nil {
		return nil, err
	}
	recs, errs := wire.CancelAll(ctx, c.js, c.topo, open, reason, o.by)
	out := &TaskCancel{}
	var first error
	for i, rec := range recs {
		switch {
		case errs[i] == nil:
			out.Cancelled = append(out.Cancelled, rec)
		case errors.Is(errs[i], wire.ErrAlreadyEnded):
			out.AlreadyEnded = append(out.AlreadyEnded, rec)
		case first == nil:
			first = errs[i]
		}
	}
	if first != nil {
		return out, fmt.Errorf("cancel task %s: %w", taskID, first)
	}
	return out, nil
}
