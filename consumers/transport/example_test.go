package transport_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/transport"
)

// A watermill Router on a persona's durable consumer: at most 8 messages
// at once, each heartbeated while its handler runs and settled by the
// handler itself through its Delivery, in the handler's goroutine, so no
// goroutine waits per message. The Settle middleware settles what a
// handler left unsettled from what it returned.
func Example() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	sub, err := transport.NewSubscriber(transport.Config{
		JetStream: js, Stream: "PERSONAQ_REQUESTS", Slots: 8,
	})
	if err != nil {
		log.Fatal(err)
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		log.Fatal(err)
	}
	// The topic is the persona: the subscriber binds to its durable consumer.
	router.AddMiddleware(transport.Settle)
	router.AddConsumerHandler("summarizer", "summarizer", sub, func(msg *message.Message) error {
		d, _ := transport.DeliveryFrom(msg.Context())
		if d.Delivered > 3 {
			return d.Term("too many deliveries") // Term: never redelivered
		}
		if err := summarize(msg.Context(), msg.Payload); err != nil {
			return d.RetryAfter(2 * time.Second) // held here, redelivered when due
		}
		return nil // Settle acks it
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := router.Run(ctx); err != nil {
		log.Fatal(err)
	}
	_ = sub.Close() // drains: in-flight messages get DrainTimeout, the rest are released
}

func summarize(context.Context, []byte) error { return nil }

// A handler that reads its message's headers as published, stops its own
// work with a cause when told to, and still settles the delivery: the
// message's context ends with the cause (WorkCancel), while what follows
// the work — storing its outcome, say — is bounded by HoldContext, which
// ends only when this replica can no longer settle the delivery.
func ExampleDelivery_WorkCancel() {
	errStopped := errors.New("stopped by its caller")
	handle := func(msg *message.Message) error {
		d, _ := transport.DeliveryFrom(msg.Context())
		log.Printf("message %s, headers %v", d.HeaderGet(jetstream.MsgIDHeader), d.Header())
		stop := time.AfterFunc(time.Minute, func() { d.WorkCancel()(errStopped) })
		defer stop.Stop()
		err := summarize(msg.Context(), d.Data())
		if errors.Is(context.Cause(msg.Context()), errStopped) {
			held, release := d.HoldContext()
			defer release()
			_ = held // store "stopped" as the outcome under held, then settle
			return d.Ack()
		}
		if err != nil {
			return d.RetryAfter(2 * time.Second)
		}
		return d.Ack()
	}
	_ = handle // registered with router.AddConsumerHandler, as in Example
}
