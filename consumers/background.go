package consumers

import (
	"context"
	"fmt"

	"github.com/personaq/personaq/consumers/saga"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// background starts the loops every replica runs beside the router: the
// MAX_DELIVERIES listener (crash-looping messages → quarantine) and, when
// compensation handlers are configured, the saga compensation runner, the
// unknown-persona sweep and the waiting-request scan (ledger outage, queue
// wait). The returned stop waits for them.
func (r *Runtime) background(ctx context.Context) (stop func(), err error) {
	stopLoops, err := r.backgroundLoops(ctx)
	if err != nil {
		return nil, err
	}
	stopUnknown, stopScan := r.startUnknownSweep(ctx), r.startWaitScan(ctx)
	return func() { stopLoops(); stopUnknown(); stopScan() }, nil
}

// startUnknownSweep runs the unknown-persona sweep until ctx ends or stop.
func (r *Runtime) startUnknownSweep(ctx context.Context) (stop func()) {
	grace := r.cfg.UnknownPersonaGrace
	if grace < 0 {
		return func() {}
	}
	if grace == 0 {
		grace = DefaultUnknownPersonaGrace
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.sweepUnknown(ctx, grace)
	}()
	return func() { cancel(); <-done }
}

func (r *Runtime) backgroundLoops(ctx context.Context) (stop func(), err error) {
	adv, err := dlq.NewAdvisoryListener(dlq.AdvisoryConfig{
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
