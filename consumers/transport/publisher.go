package transport

import (
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// Publisher is a watermill message.Publisher on JetStream. The topic is the
// subject. Each message is deduplicated by Nats-Msg-Id = topic + "/" + UUID
// (unless the metadata already carries a Nats-Msg-Id), so the same UUID on
// another topic — a forwarded message — is a message of its own; the UUID
// travels in schemas.HeaderMessageUUID. Publish waits for the server's
// acknowledgement, and a message the server dropped as a duplicate is
// reported: Publish returns an error matching ErrDuplicate.
type Publisher struct {
	js jetstream.JetStream
}

var _ message.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher.
func NewPublisher(js jetstream.JetStream) *Publisher { return &Publisher{js: js} }

// Publish implements message.Publisher. It stops at the first message that
// fails or was a duplicate.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	for _, m := range msgs {
		nm := &nats.Msg{Subject: topic, Data: m.Payload, Header: nats.Header{}}
		for k, v := range m.Metadata {
			nm.Header.Set(k, v)
		}
		nm.Header.Set(schemas.HeaderMessageUUID, m.UUID)
		if nm.Header.Get(jetstream.MsgIDHeader) == "" {
			nm.Header.Set(jetstream.MsgIDHeader, topic+"/"+m.UUID)
		}
		ack, err := p.js.PublishMsg(m.Context(), nm)
		if err != nil {
			return fmt.Errorf("publish %s to %s: %w", m.UUID, topic, err)
		}
		if ack.Duplicate {
			return fmt.Errorf("%w: %s to %s (Nats-Msg-Id %s, stream %s seq %d)", ErrDuplicate, m.UUID, topic,
				nm.Header.Get(jetstream.MsgIDHeader), ack.Stream, ack.Sequence)
		}
	}
	return nil
}

// Close implements message.Publisher.
func (p *Publisher) Close() error { return nil }
