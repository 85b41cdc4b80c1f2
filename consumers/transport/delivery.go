package transport

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Delivery is the JetStream side of a watermill message: where it came
// from, how often it was delivered, and this replica's claim on it.
type Delivery struct {
	Msg      jetstream.Msg
	Stream   string
	Consumer string
	Subject  string
	// Sequence is the message's stream sequence.
	Sequence uint64
	// Delivered counts deliveries of this message (every delivery, including
	// those caused by infrastructure; attempts are counted by the ledger).
	Delivered uint64
	Published time.Time
	Received  time.Time

	// claim is this replica's hold on the message (nil outside a Subscriber).
	claim *claim
	// settler settles the delivery (nil outside a Subscriber).
	settler *settler
}

// Held reports whether this replica still holds the delivery: its
// heartbeats kept the server from handing the message to another replica
// and nothing fenced it. Settling a delivery no longer held could end
// another replica's delivery of the same message.
func (d *Delivery) Held() bool { return d.claim.held(time.Now()) }

// Lost reports whether the claim was lost (lapsed or fenced), as opposed
// to merely running short.
func (d *Delivery) Lost() bool { return d.claim.isLost() }

// Fence gives the claim up: the message's context is cancelled with
// ErrLeaseLost and every later settle of it is refused. For work that lost
// its lease elsewhere (the ledger's): its message belongs to whoever holds
// the work now.
func (d *Delivery) Fence() { d.claim.lose(ErrLeaseLost) }

type deliveryKey struct{}

// DeliveryFrom returns the delivery a message's context carries.
func DeliveryFrom(ctx context.Context) (*Delivery, bool) {
	d, ok := ctx.Value(deliveryKey{}).(*Delivery)
	return d, ok
}

func withDelivery(ctx context.Context, d *Delivery) context.Context {
	return context.WithValue(ctx, deliveryKey{}, d)
}

func newDelivery(m jetstream.Msg, now time.Time) (*Delivery, error) {
	md, err := m.Metadata()
	if err != nil {
		return nil, err
	}
	return &Delivery{
		Msg: m, Stream: md.Stream, Consumer: md.Consumer, Subject: m.Subject(),
		Sequence: md.Sequence.Stream, Delivered: md.NumDelivered,
		Published: md.Timestamp, Received: now,
	}, nil
}
