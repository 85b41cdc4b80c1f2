package saga

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// Publish validates req and publishes it on its kind's subject (Nats-Msg-Id
// = request id), provisioning the topology if it is missing, and records the
// saga as RUNNING unless it is known already. It returns the saga as
// recorded: one already terminal will not run again (its request is settled
// without running, unless it is an operator's replay of a QUARANTINED saga).
func Publish(ctx context.Context, js jetstream.JetStream, t Topology, req *schemas.CompensationRequest) (*jetstream.PubAck, *Saga, error) {
	t = t.WithDefaults()
	data, err := schemas.Encode(req)
	if err != nil {
		return nil, nil, fmt.Errorf("publish compensation: %w", err)
	}
	_, kv, err := ensure(ctx, js, t)
	if err != nil {
		return nil, nil, err
	}
	msg := &nats.Msg{Subject: t.Subject(req.Kind), Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, req.RequestID)
	msg.Header.Set(schemas.HeaderSaga, req.SagaID)
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		return nil, nil, fmt.Errorf("publish compensation %s to %s: %w", req.RequestID, msg.Subject, err)
	}
	sg := newSaga(req, data, msg.Header, ack.Stream, ack.Sequence, time.Now())
	if _, err := kv.Create(ctx, sagaKey(req.SagaID), sg.encode()); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return ack, nil, fmt.Errorf("record saga %s: %w", req.SagaID, err)
	}
	cur, err := get(ctx, kv, req.SagaID)
	return ack, cur, err
}
