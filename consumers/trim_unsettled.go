package consumers

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/wire"
)

// Unsettled counts the requests not settled yet: queued, running or
// waiting for a retry. On a work-queue requests stream that is every
// message it holds; on a limits-retention one acked requests stay until
// trimmed, so it is each persona consumer's pending and unacknowledged
// messages, plus the requests on subjects no persona consumer serves.
func Unsettled(ctx context.Context, js jetstream.JetStream, t Topology) (uint64, error) {
	t = t.WithDefaults()
	s, err := js.Stream(ctx, t.RequestsStream)
	if err != nil {
		return 0, fmt.Errorf("requests stream %s: %w", t.RequestsStream, err)
	}
	info := s.CachedInfo()
	if info.Config.Retention != jetstream.LimitsPolicy {
		return info.State.Msgs, nil
	}
	var n uint64
	l := s.ListConsumers(ctx)
	for ci := range l.Info() {
		n += ci.NumPending + uint64(ci.NumAckPending)
	}
	if err := l.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		return 0, fmt.Errorf("consumers of %s: %w", t.RequestsStream, err)
	}
	unserved, err := wire.UnservedRequests(ctx, js, t)
	if err != nil {
		return 0, err
	}
	for _, u := range unserved {
		n += u.Pending
	}
	return n, nil
}
