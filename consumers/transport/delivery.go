package transport

import (
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// Delivery is the JetStream side of a watermill message: where it came
// from, how often it was delivered, and this replica's claim on it.
type Delivery struct {
	// Msg is the message as nats.go fetched it, for a consumer that
	// settles through it; set only when the Subscriber's Config.KeepMsg is.
	// Otherwise nil: its parsed header map (often larger than the payload)
	// would be held for as long as the message's work runs. Header and Data
	// give what it held.
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
	// Connection names the client connection the delivery came on: its
	// reconnect count plus one, the same when the pull that brought the
	// delivery was sent and when the delivery was received; 0 when a
	// reconnect came in between (or outside a Subscriber). Two deliveries
	// with the same non-zero Connection came with no reconnect between them,
	// so no restart of the server they came from.
	Connection uint64

	// claim is this replica's hold on the message (nil outside a Subscriber).
	claim *claim
	// settler settles the delivery (nil outside a Subscriber).
	settler *settler
	// ref is where the delivery's acks, naks and heartbeats go.
	ref msgRef
	// Header rebuilds the headers from the watermill message's metadata
	// (set from them), the identity headers that are not metadata (msgID,
	// msgUUID) and every value of a repeated header (multi, nil without).
	msgID, msgUUID string
	multi          nats.Header
}

// wm is the watermill message the delivery was handed out as (nil outside
// a Subscriber).
func (d *Delivery) wm() *message.Message {
	if d.settler == nil {
		return nil
	}
	return d.settler.wm
}

// Data is the message's payload, as published.
func (d *Delivery) Data() []byte {
	if d.Msg != nil {
		return d.Msg.Data()
	}
	if wm := d.wm(); wm != nil {
		return wm.Payload
	}
	return nil
}

// Header is the message's headers as published. Unless the Subscriber's
// Config.KeepMsg is set, it is rebuilt from what the delivery keeps: the
// watermill message's metadata, which the Subscriber set from the headers
// (a consumer that changes that metadata changes what Header returns),
// and the headers metadata does not carry. Each call makes a new map.
func (d *Delivery) Header() nats.Header {
	if d.Msg != nil {
		return d.Msg.Headers()
	}
	var meta message.Metadata
	if wm := d.wm(); wm != nil {
		meta = wm.Metadata
	}
	h := make(nats.Header, len(meta)+len(d.multi)+2)
	for k, v := range meta {
		h[k] = []string{v}
	}
	if d.msgID != "" {
		h[jetstream.MsgIDHeader] = []string{d.msgID}
	}
	if d.msgUUID != "" {
		h[schemas.HeaderMessageUUID] = []string{d.msgUUID}
	}
	for k, v := range d.multi {
		h[k] = v
	}
	return h
}

// HeaderGet is the first value of the message's header key ("" without
// one): Header().Get(key) without building the map.
func (d *Delivery) HeaderGet(key string) string {
	if d.Msg != nil {
		return d.Msg.Headers().Get(key)
	}
	switch key {
	case jetstream.MsgIDHeader:
		return d.msgID
	case schemas.HeaderMessageUUID:
		return d.msgUUID
	}
	if wm := d.wm(); wm != nil {
		return wm.Metadata.Get(key)
	}
	return ""
}

// Held reports whether this replica still holds the delivery: its
// heartbeats kept the server from handing the message to another replica
// and nothing fenced it. Settling a delivery no longer held could end
// another replica's delivery of the same message.
func (d *Delivery) Held() bool { return d.claim.held(time.Now()) }

// Lost reports whether the claim was lost (lapsed or fenced), as opposed
// to merely running short.
func (d *Delivery) Lost() bool { return d.claim.isLost() }

// WorkCancel is the cancel of the message's context, for a consumer that
// ends the delivery's work early with a cause of its own (a cancellation,
// a lease lost elsewhere) and still settles it: unlike Fence it keeps the
// claim. Sharing the message's context saves a context of the consumer's
// own per message in flight. Nil outside a Subscriber.
func (d *Delivery) WorkCancel() context.CancelCauseFunc {
	if d.claim == nil {
		return nil
	}
	return d.claim.cancel
}

// HoldContext is a context that ends when this replica can no longer
// settle the delivery: its claim was lost, or the subscriber stopped hard
// (a shutdown's drain time ran out). It outlives the message's context,
// which WorkCancel and the end of the work may end first: a consumer
// storing the delivery's outcome bounds its patience with it. release
// ends it; call it once done. Outside a Subscriber it never ends.
func (d *Delivery) HoldContext() (ctx context.Context, release func()) {
	if d.claim == nil || d.settler == nil {
		return context.Background(), func() {}
	}
	ctx, cancel := context.WithCancel(d.settler.sub.runCtx)
	return ctx, d.claim.whenLost(cancel)
}

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
		Stream: md.Stream, Consumer: md.Consumer, Subject: m.Subject(),
		Sequence: md.Sequence.Stream, Delivered: md.NumDelivered,
		Published: md.Timestamp, Received: now, ref: refOf(m),
	}, nil
}
