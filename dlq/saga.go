package dlq

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// SagaState is where a saga's compensation stands.
type SagaState string

// Saga states. COMPENSATED and QUARANTINED are terminal.
const (
	// SagaRunning: its compensation has not run to an end yet.
	SagaRunning SagaState = "RUNNING"
	// SagaCompensated: the compensation handler returned success.
	SagaCompensated SagaState = "COMPENSATED"
	// SagaQuarantined: the compensation failed for good (or no handler
	// exists for its kind); parked for a person with a quarantine record.
	SagaQuarantined SagaState = "QUARANTINED"
)

// Terminal reports whether the state ends the saga.
func (s SagaState) Terminal() bool { return s == SagaCompensated || s == SagaQuarantined }

// Saga is a saga's recorded state in the saga bucket (key: saga id).
type Saga struct {
	ID     string                   `json:"saga_id"`
	State  SagaState                `json:"state"`
	Kind   schemas.CompensationKind `json:"kind"`
	Target string                   `json:"target"`
	// TerminalReason explains a QUARANTINED state to a person.
	TerminalReason string `json:"terminal_reason,omitempty"`
	// Attempts counts handler invocations of the last run.
	Attempts int `json:"attempts,omitempty"`
	// QuarantineSeq is the compensation_failed record (0: not written yet,
	// the next sweep writes it).
	QuarantineSeq uint64 `json:"quarantine_seq,omitempty"`
	// Request is the compensation request being run; Payload and Headers
	// keep its message as received, for the quarantine record.
	Request *schemas.CompensationRequest `json:"request"`
	Payload []byte                       `json:"payload,omitempty"`
	Headers map[string][]string          `json:"headers,omitempty"`
	// SourceStream and SourceSeq locate the request's message.
	SourceStream string                  `json:"source_stream,omitempty"`
	SourceSeq    uint64                  `json:"source_seq,omitempty"`
	Errors       []schemas.AttemptRecord `json:"errors,omitempty"`
	// Reopened counts operator replays that put the saga back to RUNNING.
	Reopened  int       `json:"reopened,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Revision is the KV revision the saga was read at (for updates).
	Revision uint64 `json:"-"`
}

// CompensationTopology names where compensations live. The zero value is
// completed by WithDefaults.
type CompensationTopology struct {
	// Stream holds compensation requests (work-queue retention).
	// Default: DefaultCompensationsStream.
	Stream string
	// Prefix: requests of kind K go to <prefix>.K. Default: DefaultCompensationsPrefix.
	Prefix string
	// Durable is the consumer sweepers share. Default: DefaultCompensationsDurable.
	Durable string
	// Bucket is the saga state KV bucket. Default: DefaultSagaBucket.
	Bucket string
	// Replicas and Storage of the stream and bucket. Default: 1, file.
	Replicas int
	Storage  jetstream.StorageType
}

// WithDefaults fills unset fields.
func (t CompensationTopology) WithDefaults() CompensationTopology {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&t.Stream, DefaultCompensationsStream)
	def(&t.Prefix, DefaultCompensationsPrefix)
	def(&t.Durable, DefaultCompensationsDurable)
	def(&t.Bucket, DefaultSagaBucket)
	if t.Replicas == 0 {
		t.Replicas = 1
	}
	return t
}

// Subject is where requests of kind are published.
func (t CompensationTopology) Subject(kind schemas.CompensationKind) string {
	return t.Prefix + "." + string(kind)
}

// ProvisionCompensations creates or updates the compensation stream, the
// sweepers' durable consumer and the saga bucket. It is idempotent.
func ProvisionCompensations(ctx context.Context, js jetstream.JetStream, t CompensationTopology) error {
	t = t.WithDefaults()
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: t.Stream, Description: "personaq saga compensation requests",
		Subjects: []string{t.Prefix + ".>"}, Retention: jetstream.WorkQueuePolicy,
		Replicas: t.Replicas, Storage: t.Storage,
	})
	if err != nil {
		return fmt.Errorf("provision stream %s: %w", t.Stream, err)
	}
	_, err = js.CreateOrUpdateConsumer(ctx, t.Stream, jetstream.ConsumerConfig{
		Durable: t.Durable, Description: "personaq compensation sweepers",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, MaxDeliver: -1, MaxAckPending: 1024,
	})
	if err != nil {
		return fmt.Errorf("provision consumer %s: %w", t.Durable, err)
	}
	if _, err := sagaBucket(ctx, js, t, true); err != nil {
		return err
	}
	return nil
}

// ensureCompensations provisions the topology when its stream or consumer
// is missing, and leaves an existing one (maybe configured by hand, R3)
// alone.
func ensureCompensations(ctx context.Context, js jetstream.JetStream, t CompensationTopology) error {
	_, err := js.Consumer(ctx, t.Stream, t.Durable)
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound) {
		return ProvisionCompensations(ctx, js, t)
	}
	if err != nil {
		return fmt.Errorf("compensation consumer %s: %w", t.Durable, err)
	}
	_, err = sagaBucket(ctx, js, t, true)
	return err
}

func sagaBucket(ctx context.Context, js jetstream.JetStream, t CompensationTopology, create bool) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, t.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && create {
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: t.Bucket, Description: "personaq saga states (RUNNING, COMPENSATED, QUARANTINED)",
			History: 5, Replicas: t.Replicas, Storage: t.Storage,
		})
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w: saga bucket %s does not exist", ErrStreamMissing, t.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("saga bucket %s: %w", t.Bucket, err)
	}
	return kv, nil
}

// PublishCompensation validates req and publishes it on its kind's subject
// (Nats-Msg-Id = request id), provisioning the topology if it is missing, and records
// the saga as RUNNING unless it is known already. It returns the saga as
// recorded: one already terminal will not run again (a sweep ignores the
// request, unless it is an operator's replay of a QUARANTINED saga).
func PublishCompensation(ctx context.Context, js jetstream.JetStream, t CompensationTopology, req *schemas.CompensationRequest) (*jetstream.PubAck, *Saga, error) {
	t = t.WithDefaults()
	data, err := schemas.Encode(req)
	if err != nil {
		return nil, nil, fmt.Errorf("publish compensation: %w", err)
	}
	if err := ensureCompensations(ctx, js, t); err != nil {
		return nil, nil, err
	}
	msg := &nats.Msg{Subject: t.Subject(req.Kind), Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, req.RequestID)
	msg.Header.Set(HeaderSaga, req.SagaID)
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		return nil, nil, fmt.Errorf("publish compensation %s to %s: %w", req.RequestID, msg.Subject, err)
	}
	kv, err := sagaBucket(ctx, js, t, true)
	if err != nil {
		return ack, nil, err
	}
	sg := newSaga(req, data, msg.Header, ack.Stream, ack.Sequence, time.Now())
	if _, err := kv.Create(ctx, SagaKey(req.SagaID), sg.encode()); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return ack, nil, fmt.Errorf("record saga %s: %w", req.SagaID, err)
	}
	cur, err := getSaga(ctx, kv, req.SagaID)
	return ack, cur, err
}

func newSaga(req *schemas.CompensationRequest, payload []byte, h nats.Header, stream string, seq uint64, now time.Time) *Saga {
	return &Saga{
		ID: req.SagaID, State: SagaRunning, Kind: req.Kind, Target: req.Target, Request: req,
		Payload: slices.Clone(payload), Headers: map[string][]string(h), SourceStream: stream, SourceSeq: seq,
		CreatedAt: now.UTC(), UpdatedAt: now.UTC(),
	}
}

func (s *Saga) encode() []byte {
	data, _ := json.Marshal(s)
	return data
}

// SagaKey maps a saga id onto its KV key: the id itself when it is a
// valid key, else "b64." and its URL-safe base64.
func SagaKey(id string) string {
	if kvKeyRE.MatchString(id) && id[0] != '.' && id[len(id)-1] != '.' {
		return id
	}
	return "b64." + base64.RawURLEncoding.EncodeToString([]byte(id))
}

func getSaga(ctx context.Context, kv jetstream.KeyValue, id string) (*Saga, error) {
	return getSagaKey(ctx, kv, SagaKey(id))
}

func getSagaKey(ctx context.Context, kv jetstream.KeyValue, key string) (*Saga, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, fmt.Errorf("%w: %s", ErrSagaNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("read saga %s: %w", key, err)
	}
	var sg Saga
	if err := json.Unmarshal(e.Value(), &sg); err != nil {
		return nil, fmt.Errorf("saga %s: undecodable state: %w", key, err)
	}
	sg.Revision = e.Revision()
	return &sg, nil
}
