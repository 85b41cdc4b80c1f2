package saga

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// State is where a saga's compensation stands.
type State string

// Saga states. COMPENSATED and QUARANTINED are terminal.
const (
	// Running: its compensation has not run to an end yet.
	Running State = "RUNNING"
	// Compensated: the compensation handler returned success.
	Compensated State = "COMPENSATED"
	// Quarantined: the compensation failed for good (or no handler exists
	// for its kind); parked for a person with a quarantine record.
	Quarantined State = "QUARANTINED"
)

// Terminal reports whether the state ends the saga.
func (s State) Terminal() bool { return s == Compensated || s == Quarantined }

// Saga is a saga's recorded state in the saga bucket, keyed by its id (as
// "b64." and its URL-safe base64 when the id is not a valid key).
type Saga struct {
	ID     string                   `json:"saga_id"`
	State  State                    `json:"state"`
	Kind   schemas.CompensationKind `json:"kind"`
	Target string                   `json:"target"`
	// TerminalReason explains a QUARANTINED state to a person.
	TerminalReason string `json:"terminal_reason,omitempty"`
	// Attempts counts handler invocations since the saga was recorded (or
	// reopened); the next attempt is Attempts+1.
	Attempts int `json:"attempts,omitempty"`
	// Released counts deliveries of the request handed back without an
	// attempt (shutdown, snooze); the others count as attempts even when
	// their outcome was never recorded (a crash mid-attempt).
	Released int `json:"released,omitempty"`
	// QuarantineSeq is the compensation_failed record (0: not written yet;
	// the request's next delivery writes it).
	QuarantineSeq uint64 `json:"quarantine_seq,omitempty"`
	// Request is the compensation request being run; Payload and Headers
	// keep its message as received, for the quarantine record.
	Request *schemas.CompensationRequest `json:"request"`
	Payload []byte                       `json:"payload,omitempty"`
	Headers map[string][]string          `json:"headers,omitempty"`
	// SourceStream and SourceSeq locate the request's message.
	SourceStream string `json:"source_stream,omitempty"`
	SourceSeq    uint64 `json:"source_seq,omitempty"`
	// Errors is the history of failed attempts, oldest first: what the
	// retry policy decides on, and what a quarantine record carries.
	Errors []schemas.AttemptRecord `json:"errors,omitempty"`
	// Reopened counts operator replays that put the saga back to RUNNING.
	Reopened  int       `json:"reopened,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Revision is the KV revision the saga was read at (for updates).
	Revision uint64 `json:"-"`
}

func newSaga(req *schemas.CompensationRequest, payload []byte, h nats.Header, stream string, seq uint64, now time.Time) *Saga {
	return &Saga{
		ID: req.SagaID, State: Running, Kind: req.Kind, Target: req.Target, Request: req,
		Payload: slices.Clone(payload), Headers: map[string][]string(h), SourceStream: stream, SourceSeq: seq,
		CreatedAt: now.UTC(), UpdatedAt: now.UTC(),
	}
}

func (s *Saga) encode() []byte {
	data, _ := json.Marshal(s)
	return data
}

var kvKeyRE = regexp.MustCompile(`^[-/_=.a-zA-Z0-9]+$`)

// sagaKey maps a saga id onto its KV key: the id itself when it is a valid
// key, else "b64." and its URL-safe base64.
func sagaKey(id string) string {
	if kvKeyRE.MatchString(id) && id[0] != '.' && id[len(id)-1] != '.' {
		return id
	}
	return "b64." + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// Get returns the recorded state of saga id (ErrNotFound if none,
// ErrNotProvisioned if no saga was ever recorded).
func Get(ctx context.Context, js jetstream.JetStream, t Topology, id string) (*Saga, error) {
	kv, err := bucket(ctx, js, t.WithDefaults(), false)
	if err != nil {
		return nil, err
	}
	return get(ctx, kv, id)
}

// List returns every recorded saga, by key (ErrNotProvisioned if no saga
// was ever recorded).
func List(ctx context.Context, js jetstream.JetStream, t Topology) ([]*Saga, error) {
	kv, err := bucket(ctx, js, t.WithDefaults(), false)
	if err != nil {
		return nil, err
	}
	return list(ctx, kv)
}

func list(ctx context.Context, kv jetstream.KeyValue) ([]*Saga, error) {
	keys, err := keys(ctx, kv)
	if err != nil {
		return nil, err
	}
	out := make([]*Saga, 0, len(keys))
	for _, k := range keys {
		sg, err := getKey(ctx, kv, k)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, sg)
	}
	return out, nil
}

func keys(ctx context.Context, kv jetstream.KeyValue) ([]string, error) {
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("list sagas: %w", err)
	}
	defer func() { _ = lister.Stop() }()
	var ks []string
	for k := range lister.Keys() {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks, nil
}

func get(ctx context.Context, kv jetstream.KeyValue, id string) (*Saga, error) {
	return getKey(ctx, kv, sagaKey(id))
}

func getKey(ctx context.Context, kv jetstream.KeyValue, key string) (*Saga, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
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

// update writes next over cur if nobody changed it since cur was read, and
// sets next.Revision.
func update(ctx context.Context, kv jetstream.KeyValue, cur, next *Saga) error {
	rev, err := kv.Update(ctx, sagaKey(cur.ID), next.encode(), cur.Revision)
	if err != nil {
		return fmt.Errorf("update saga %s: %w", cur.ID, err)
	}
	next.Revision = rev
	return nil
}
