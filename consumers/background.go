package consumers

import (
	"context"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/personaq/personaq/consumers/advisory"
	"github.com/personaq/personaq/consumers/saga"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// loops are the loops Run keeps beside the router, on one loop.Group:
// closing the subscribers when ctx ends (what drains in-flight work; the
// router only closes the ones it still watches, and drained is closed
// after), readiness, the ledger ping and attempt leases (with a ledger),
// the circuit and backlog watches, the unknown-persona sweep and the
// waiting-request scan (ledger outage, queue wait).
func (r *Runtime) loops(router *message.Router, subs []*transport.Subscriber, drained chan<- struct{}) []func(context.Context) {
	loops := []func(context.Context){
		func(ctx context.Context) {
			defer close(drained)
			<-ctx.Done()
			for _, s := range subs {
				_ = s.Close()
			}
		},
		func(ctx context.Context) { r.watchBound(ctx, router) },
		r.watchCircuits,
		r.watchBacklog,
		r.scanWaitingRequests,
	}
	if r.ledger != nil {
		loops = append(loops,
			func(ctx context.Context) { r.watchLedger(ctx, 2*time.Second) },
			func(ctx context.Context) { r.leases.run(ctx, r.leaseInterval()) })
	}
	if grace := r.unknownGrace(); grace > 0 {
		loops = append(loops, func(ctx context.Context) { r.sweepUnknown(ctx, grace) })
	}
	return loops
}

// watchBound marks the replica ready once the router runs, and not ready
// (draining) once ctx ends.
func (r *Runtime) watchBound(ctx context.Context, router *message.Router) {
	select {
	case <-router.Running():
		r.health.bound.Store(true)
	case <-ctx.Done():
	}
	<-ctx.Done()
	r.health.bound.Store(false)
}

// unknownGrace is how long a request on a subject no replica serves waits
// before the sweep quarantines it; 0: no sweep.
func (r *Runtime) unknownGrace() time.Duration {
	switch grace := r.cfg.UnknownPersonaGrace; {
	case grace < 0:
		return 0
	case grace == 0:
		return DefaultUnknownPersonaGrace
	default:
		return grace
	}
}

// background starts the MAX_DELIVERIES listener (crash-looping messages →
// quarantine) and, when compensation handlers are configured, the saga
// compensation runner; each runs its loops on its own loop.Group. The
// returned stop stops both and waits for them.
func (r *Runtime) background(ctx context.Context) (stop func(), err error) {
	adv, err := advisory.NewListener(advisory.Config{
		JetStream: r.js, Writer: r.dlq, RequestsStream: r.topo.RequestsStream,
		Replicas: r.topo.Replicas, Storage: r.topo.Storage, Logger: &r.log, Annotate: r.annotate,
		Conclude: r.concludeCaptured,
	})
	if err != nil {
		return nil, err
	}
	if err := adv.Start(ctx); err != nil {
		return nil, fmt.Errorf("max-deliveries listener: %w", err)
	}
	if len(r.cfg.Compensations) == 0 {
		return adv.Stop, nil
	}
	comp, err := saga.NewRunner(saga.Config{JetStream: r.js, Writer: r.dlq, Handlers: r.cfg.Compensations, Logger: &r.log})
	if err != nil {
		adv.Stop()
		return nil, err
	}
	if err := comp.Start(ctx); err != nil {
		adv.Stop()
		return nil, fmt.Errorf("compensation runner: %w", err)
	}
	return func() { comp.Stop(); adv.Stop() }, nil
}

// annotate completes a max_deliveries record with the ledger's attempt
// history of its request, when the payload decodes and the ledger answers.
func (r *Runtime) annotate(ctx context.Context, rec *schemas.QuarantineRecord) {
	if r.ledger == nil {
		return
	}
	req, err := schemas.DecodeRequest(rec.Payload)
	if err != nil {
		return
	}
	rec.RequestID, rec.TaskID, rec.Step = req.RequestID, req.TaskID, req.Step
	hist, _, err := r.ledger.History(ctx, stepKey(req))
	if err != nil {
		r.log.Warn().Err(err).Str("task_id", req.TaskID).Msg("max_deliveries record without ledger history")
		return
	}
	rec.Attempts, rec.Errors = len(hist), nil
	for _, a := range hist {
		rec.Errors = append(rec.Errors, a.Record())
	}
	if len(hist) > 0 {
		rec.FirstFailureAt, rec.LastFailureAt = hist[0].At.UTC(), hist[len(hist)-1].At.UTC()
	}
	rec.Usage = retry.TotalUsage(hist).Record()
}
