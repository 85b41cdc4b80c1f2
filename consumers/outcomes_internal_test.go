package consumers

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

// The batch tests build the runtime's record writer, and the messages it
// writes, without a runtime.

// NewOutcomes is the runtime's record writer on t.
func NewOutcomes(js jetstream.JetStream, t Topology) *Outcomes { return newOutcomes(js, t) }

var errCaptured = errors.New("captured, not written")

// recordMsg is the message Create writes for ev, with its create-once
// filter, captured before it is published.
func (s *Outcomes) recordMsg(ev *schemas.OutcomeEvent) (msg *nats.Msg, filter string, err error) {
	_, _, err = s.Create(context.Background(), ev, func(_ context.Context, m *nats.Msg, f string) error {
		msg, filter = m, f
		return errCaptured
	})
	if msg != nil {
		return msg, filter, nil
	}
	return nil, "", err
}

var isWrongLastSequence = wire.IsWrongLastSequence
