package consumers

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// startDurability sets the replica up for the requests stream it finds:
// limits retention gets plain acks and the trimmer; a work queue (a
// deployment provisioned before, not migrated) keeps confirmed acks, each
// a fsynced delete marker on the server, and says so once. It also picks
// how terminal records are written (batch.go). stop ends what it started.
func (r *Runtime) startDurability(ctx context.Context) (stop func(), err error) {
	ret, err := RequestRetention(ctx, r.js, r.topo)
	if err != nil {
		return nil, err
	}
	r.outcomes.useBatches(ctx, &r.log, r.obs)
	if ret != jetstream.LimitsPolicy {
		r.log.Warn().Str("stream", r.topo.RequestsStream).Str("retention", ret.String()).
			Msg("requests stream is a work queue: every ack is a second fsync on the server; migrate it to limits retention (personaq migrate-requests)")
		return r.outcomes.stopBatches, nil
	}
	r.plainAck = true
	stopTrim := r.startTrim(ctx, trimInterval)
	return func() { stopTrim(); r.outcomes.stopBatches() }, nil
}
