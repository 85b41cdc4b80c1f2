package saga

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/streams"
	"github.com/personaq/personaq/schemas"
)

// DefaultAckWait is the compensation consumer's AckWait; a runner
// heartbeats a running compensation every third of it, so an attempt may
// take longer. The default names are schemas.DefaultCompensations* and
// schemas.DefaultSagaBucket.
const DefaultAckWait = time.Minute

// Topology names where compensations live. The zero value is completed by
// WithDefaults.
type Topology struct {
	// Stream holds compensation requests. Default: schemas.DefaultCompensationsStream.
	Stream string
	// Prefix: requests of kind K go to <prefix>.K. Default: schemas.DefaultCompensationsPrefix.
	Prefix string
	// Durable is the consumer runners share. Default: schemas.DefaultCompensationsDurable.
	Durable string
	// Bucket is the saga state KV bucket. Default: schemas.DefaultSagaBucket.
	Bucket string
	// AckWait of the consumer. Default: DefaultAckWait.
	AckWait time.Duration
	// Replicas and Storage of the stream and bucket. Default: 1, file.
	Replicas int
	Storage  jetstream.StorageType
}

// WithDefaults fills unset fields.
func (t Topology) WithDefaults() Topology {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&t.Stream, schemas.DefaultCompensationsStream)
	def(&t.Prefix, schemas.DefaultCompensationsPrefix)
	def(&t.Durable, schemas.DefaultCompensationsDurable)
	def(&t.Bucket, schemas.DefaultSagaBucket)
	if t.AckWait <= 0 {
		t.AckWait = DefaultAckWait
	}
	if t.Replicas == 0 {
		t.Replicas = 1
	}
	return t
}

// Subject is where requests of kind are published.
func (t Topology) Subject(kind schemas.CompensationKind) string {
	return t.Prefix + "." + string(kind)
}

// recordID is the compensation_failed record id of a saga's request: fixed,
// so writing the record again stores one (it is the Nats-Msg-Id).
func recordID(sagaID, requestID string) string { return "c." + sagaID + "." + requestID }

// resumeMsgID is the Nats-Msg-Id of a request queued again by a sweep for
// the saga state at revision rev.
func resumeMsgID(requestID string, rev uint64) string {
	return fmt.Sprintf("resume.%s.%d", requestID, rev)
}

// Provision creates or updates the compensation stream, the runners'
// consumer and the saga bucket. It is idempotent. The consumer has no
// BackOff: retries come back through NakWithDelay with the policy's delay.
func Provision(ctx context.Context, js jetstream.JetStream, t Topology) error {
	t = t.WithDefaults()
	err := streams.Ensure(ctx, js, jetstream.StreamConfig{
		Name: t.Stream, Description: "personaq saga compensation requests",
		Subjects: []string{t.Prefix + ".>"}, Retention: jetstream.WorkQueuePolicy,
		Replicas: t.Replicas, Storage: t.Storage,
	})
	if err != nil {
		return err
	}
	_, err = js.CreateOrUpdateConsumer(ctx, t.Stream, jetstream.ConsumerConfig{
		Durable: t.Durable, Description: "personaq compensation runners",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: t.AckWait, MaxDeliver: -1, MaxAckPending: 1024,
	})
	if err != nil {
		return fmt.Errorf("provision consumer %s: %w", t.Durable, err)
	}
	_, err = bucket(ctx, js, t, true)
	return err
}

// ensure provisions the topology when its stream or consumer is missing,
// and leaves an existing one (maybe configured by hand, R3) alone.
func ensure(ctx context.Context, js jetstream.JetStream, t Topology) (jetstream.Consumer, jetstream.KeyValue, error) {
	cons, err := js.Consumer(ctx, t.Stream, t.Durable)
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound) {
		if err := Provision(ctx, js, t); err != nil {
			return nil, nil, err
		}
		cons, err = js.Consumer(ctx, t.Stream, t.Durable)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("compensation consumer %s: %w", t.Durable, err)
	}
	kv, err := bucket(ctx, js, t, true)
	return cons, kv, err
}

func bucket(ctx context.Context, js jetstream.JetStream, t Topology, create bool) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, t.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && create {
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: t.Bucket, Description: "personaq saga states (RUNNING, COMPENSATED, QUARANTINED)",
			History: 5, Replicas: t.Replicas, Storage: t.Storage,
		})
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNotProvisioned, t.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("saga bucket %s: %w", t.Bucket, err)
	}
	return kv, nil
}
