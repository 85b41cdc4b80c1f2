package wire

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/tracing"
	"github.com/personaq/personaq/schemas"
)

// PublishRequest validates req and publishes it on its persona's subject
// with Nats-Msg-Id = request id, so a retried publish within the stream's
// duplicate window is stored once. The PubAck says whether it was a duplicate.
// The trace context of ctx travels in the message headers (traceparent).
func PublishRequest(ctx context.Context, js jetstream.JetStream, t Topology, req *schemas.PersonaRequest, opts ...PublishOption) (*jetstream.PubAck, error) {
	t = t.WithDefaults()
	data, err := schemas.Encode(req)
	if err != nil {
		return nil, fmt.Errorf("publish request: %w", err)
	}
	msg := &nats.Msg{Subject: t.RequestSubject(req.Persona), Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, req.RequestID)
	if req.CorrelationID != "" {
		msg.Header.Set(schemas.HeaderCorrelationID, req.CorrelationID)
	}
	tracing.Inject(ctx, msg.Header) // the caller's span (the client's send span) parents every attempt
	for _, o := range opts {
		o(msg)
	}
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("publish request %s to %s: %w", req.RequestID, msg.Subject, err)
	}
	return ack, nil
}

// PublishOption changes a request message before it is published.
type PublishOption func(*nats.Msg)

// WithDeadline sets the request's step deadline (schemas.HeaderDeadline); zero
// sets none.
func WithDeadline(deadline time.Time) PublishOption {
	return func(m *nats.Msg) {
		if !deadline.IsZero() {
			m.Header.Set(schemas.HeaderDeadline, deadline.UTC().Format(time.RFC3339Nano))
		}
	}
}
