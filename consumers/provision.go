package consumers

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/streams"
	"github.com/personaq/personaq/consumers/wire"
)

// ConsumerSpec sizes the durable consumer of one persona.
type ConsumerSpec struct {
	// Persona names the consumer (durable "personaq-<persona>") and its
	// filter subject. Required.
	Persona string
	// AckWait is how long the server waits for an ack or heartbeat before
	// redelivering. Required; the runtime sets it above the attempt timeout
	// and sends InProgress heartbeats at a third of it.
	AckWait time.Duration
	// MaxAckPending caps unacknowledged messages across ALL replicas of the
	// consumer, so it must be ≥ replicas × slots. Required.
	MaxAckPending int
	// MaxDeliver is only a safety net for crash loops (attempts are counted
	// by the ledger); reaching it raises the MAX_DELIVERIES advisory.
	// Default: 50.
	MaxDeliver int
	// Metadata is stored on the consumer: the runtime publishes the
	// persona's policy there (see PersonaInfo), so a client can compute a
	// step budget without the replica's configuration.
	Metadata map[string]string
}

// Provision creates or updates the streams of t and one durable pull
// consumer per spec. It is idempotent, so every replica runs it at start.
//
// No consumer gets a BackOff list: BackOff replaces AckWait as the
// redelivery deadline and shifts every NakWithDelay by BackOff[n]−BackOff[0]
// (nats-server#4726), and our retry delays are NakWithDelay.
func Provision(ctx context.Context, js jetstream.JetStream, t Topology, specs []ConsumerSpec) error {
	t = t.WithDefaults()
	if err := t.Validate(); err != nil {
		return err
	}
	for _, cfg := range streamConfigs(t) {
		if err := ensureStream(ctx, js, t, cfg); err != nil {
			return err
		}
	}
	if err := provisionOutputs(ctx, js, t); err != nil {
		return err
	}
	for _, s := range specs {
		if err := provisionConsumer(ctx, js, t, s); err != nil {
			return err
		}
	}
	return nil
}

// ensureStream provisions one of the runtime's streams. Replicas may not
// read the quarantine (least privilege: records hold requests' payloads),
// so it is updated blind — an identical config changes nothing, and no
// replica creates a consumer on it; the others are read first and updated
// only when a field differs (streams.Ensure).
func ensureStream(ctx context.Context, js jetstream.JetStream, t Topology, cfg jetstream.StreamConfig) error {
	if cfg.Name == t.RequestsStream {
		cfg.Retention = keptRetention(ctx, js, cfg)
	}
	if cfg.Name != t.QuarantineStream {
		return streams.Ensure(ctx, js, cfg)
	}
	if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("provision stream %s: %w", cfg.Name, err)
	}
	return nil
}

// provisionOutputs creates the object store for large persona answers; its
// objects expire with the terminal records that reference them.
func provisionOutputs(ctx context.Context, js jetstream.JetStream, t Topology) error {
	// Left alone when already as wanted, like the streams (streams.Ensure).
	if ob, err := js.ObjectStore(ctx, t.OutputsBucket); err == nil {
		if st, err := ob.Status(ctx); err == nil && st.TTL() == t.OutcomesMaxAge && st.Replicas() == max(t.Replicas, 1) {
			return nil
		}
	}
	_, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: t.OutputsBucket, Description: "personaq persona outputs too large to keep inline",
		TTL: t.OutcomesMaxAge, Storage: t.Storage, Replicas: t.Replicas,
	})
	if err != nil {
		return fmt.Errorf("provision object store %s: %w", t.OutputsBucket, err)
	}
	return nil
}

func streamConfigs(t Topology) []jetstream.StreamConfig {
	base := func(name, subjects string) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name: name, Subjects: []string{subjects + ".>"}, Replicas: t.Replicas,
			Storage: t.Storage, Duplicates: t.DuplicateWindow,
		}
	}
	req := base(t.RequestsStream, t.RequestsPrefix)
	// Limits retention: an ack writes nothing (a work queue's ack is a
	// fsynced delete marker); the trimmer purges what every ack covers
	// (trim.go). No MaxAge: an unacknowledged request is never dropped.
	req.Retention = jetstream.LimitsPolicy
	req.Description = "personaq persona requests"
	q := base(t.QuarantineStream, t.QuarantinePrefix)
	q.Retention = jetstream.LimitsPolicy
	q.Description = "personaq quarantine records: browse, replay, purge"
	out := base(t.OutcomesStream, t.OutcomesPrefix)
	out.MaxAge = t.OutcomesMaxAge
	out.Description = "personaq terminal records: one per request, written once"
	// Records of concurrent completions are committed as one atomic batch:
	// one fsync for the batch (batch.go).
	out.AllowAtomicPublish = true
	att := base(t.AttemptsStream, t.AttemptsPrefix)
	att.MaxAge = t.AttemptsMaxAge
	// Attempt events are for watching, not a record: memory storage keeps
	// them off the disk's fsync path (a server restart forgets them). The
	// byte cap keeps them from taking the server's JetStream memory, which
	// memory-storage request streams need, at high rates: the oldest go.
	att.Storage = jetstream.MemoryStorage
	att.MaxBytes, att.Discard = t.AttemptsMaxBytes, jetstream.DiscardOld
	att.Description = "personaq attempt events (started, failed), for callers following a request"
	return []jetstream.StreamConfig{req, q, out, att, wire.OutputStreamConfig(t)}
}

func provisionConsumer(ctx context.Context, js jetstream.JetStream, t Topology, s ConsumerSpec) error {
	if s.Persona == "" || s.AckWait <= 0 || s.MaxAckPending <= 0 {
		return fmt.Errorf("%w: consumer %q: persona, ack_wait and max_ack_pending are required", ErrInvalidConfig, s.Persona)
	}
	if s.MaxDeliver == 0 {
		s.MaxDeliver = defaultMaxDeliver
	}
	_, err := js.CreateOrUpdateConsumer(ctx, t.RequestsStream, jetstream.ConsumerConfig{
		Durable:       Durable(s.Persona),
		Description:   "personaq persona " + s.Persona,
		FilterSubject: t.RequestSubject(s.Persona),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.AckWait,
		MaxAckPending: s.MaxAckPending,
		MaxDeliver:    s.MaxDeliver,
		MaxWaiting:    512,
		Metadata:      s.Metadata,
	})
	if err != nil {
		return fmt.Errorf("provision consumer %s: %w", Durable(s.Persona), err)
	}
	return nil
}

// keptRetention is the retention the requests stream is provisioned with:
// an existing work-queue stream stays one, since the server cannot change
// a work queue's retention in place (see docs/durability.md for the
// migration); everything else gets cfg's.
func keptRetention(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.RetentionPolicy {
	s, err := js.Stream(ctx, cfg.Name)
	if err == nil && s.CachedInfo().Config.Retention == jetstream.WorkQueuePolicy {
		return jetstream.WorkQueuePolicy
	}
	return cfg.Retention
}

// RequestRetention reads the retention of t's requests stream: limits on
// a deployment provisioned by this version, work queue on one provisioned
// before and not migrated yet.
func RequestRetention(ctx context.Context, js jetstream.JetStream, t Topology) (jetstream.RetentionPolicy, error) {
	t = t.WithDefaults()
	s, err := js.Stream(ctx, t.RequestsStream)
	if err != nil {
		return 0, fmt.Errorf("requests stream %s: %w", t.RequestsStream, err)
	}
	return s.CachedInfo().Config.Retention, nil
}
