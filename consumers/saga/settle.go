package saga

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/transport"
)

// delivery is one delivery of a compensation request: the JetStream
// message (payload, headers, metadata) and how it is settled. The runner's
// deliveries come from the shared transport (wm set: its subscriber
// heartbeats them and sends the settles); a sweep fetches its own and
// settles them directly.
type delivery struct {
	raw jetstream.Msg
	wm  *message.Message
}

func (d *delivery) Data() []byte                              { return d.raw.Data() }
func (d *delivery) Headers() nats.Header                      { return d.raw.Headers() }
func (d *delivery) Subject() string                           { return d.raw.Subject() }
func (d *delivery) Metadata() (*jetstream.MsgMetadata, error) { return d.raw.Metadata() }

// errNotSettled: the transport could not send a settle (it logged why).
var errNotSettled = errors.New("compensation request not settled")

// settle is the one place a delivery is settled: acked (its saga recorded
// what happened), terminated (invalid, its record stored: term non-empty),
// or handed back to come again after retry (0: at once). The runner's
// settles go through the transport, a sweep's to the message itself.
func (d *delivery) settle(ctx context.Context, term string, ack bool, retry time.Duration) error {
	if d.wm != nil {
		td, ok := transport.DeliveryFrom(d.wm.Context())
		if !ok {
			return errNotSettled
		}
		var err error
		switch {
		case term != "":
			err = td.Term(term)
		case ack:
			err = td.Ack()
		default:
			err = td.RetryAfter(retry)
		}
		if err != nil {
			return fmt.Errorf("%w: %w", errNotSettled, err)
		}
		return nil
	}
	switch {
	case term != "":
		return d.raw.TermWithReason(term)
	case ack:
		return d.raw.DoubleAck(ctx)
	case retry > 0:
		return d.raw.NakWithDelay(retry)
	default:
		return d.raw.Nak()
	}
}

func (d *delivery) ack(ctx context.Context) error { return d.settle(ctx, "", true, 0) }

func (d *delivery) term(reason string) error { return d.settle(context.Background(), reason, false, 0) }

func (d *delivery) nak(retry time.Duration) error {
	return d.settle(context.Background(), "", false, retry)
}
