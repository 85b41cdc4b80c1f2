package wire

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/streams"
	"github.com/personaq/personaq/schemas"
)

// A request's terminal record is one message on the outcomes stream,
// written with "expect no message yet on personaq.outcomes.*.*.<key>":
// the server accepts the first terminal state of a request and refuses
// every later one, whichever replica sends it and however late (not just
// within a duplicate window). The record is also the outcome event, so
// there is exactly one event per request.

// Outcomes reads terminal records and the outputs they carry, and writes
// them create-once (a cancel from a caller, every ending inside the
// runtime); the stream and bucket handles are looked up once, since each
// lookup is a round trip. Safe for concurrent use.
type Outcomes struct {
	js   jetstream.JetStream
	topo Topology

	mu      sync.Mutex
	stream  jetstream.Stream
	outputs jetstream.ObjectStore
}

// NewOutcomes returns an Outcomes on t's outcomes stream and outputs bucket.
func NewOutcomes(js jetstream.JetStream, t Topology) *Outcomes {
	return &Outcomes{js: js, topo: t.WithDefaults()}
}

// Stream is the outcomes stream, looked up once.
func (s *Outcomes) Stream(ctx context.Context) (jetstream.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream == nil {
		st, err := s.js.Stream(ctx, s.topo.OutcomesStream)
		if err != nil {
			return nil, fmt.Errorf("outcomes stream %s: %w", s.topo.OutcomesStream, err)
		}
		s.stream = st
	}
	return s.stream, nil
}

func (s *Outcomes) bucket(ctx context.Context) (jetstream.ObjectStore, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.outputs == nil {
		ob, err := s.js.ObjectStore(ctx, s.topo.OutputsBucket)
		if err != nil {
			return nil, fmt.Errorf("outputs bucket %s: %w", s.topo.OutputsBucket, err)
		}
		s.outputs = ob
	}
	return s.outputs, nil
}

// RecordWriter publishes a terminal record message whose create-once
// expectation is on filter (the runtime commits records of concurrent
// completions together as one batch).
type RecordWriter func(ctx context.Context, msg *nats.Msg, filter string) error

// Create stores ev as the request's terminal record unless one exists,
// through write (nil: published alone, repeated while a cluster elects a
// leader). It returns the record that stands and whether it is ev.
func (s *Outcomes) Create(ctx context.Context, ev *schemas.OutcomeEvent, write RecordWriter) (*schemas.OutcomeEvent, bool, error) {
	msg, filter, err := RecordMsg(s.topo, ev)
	if err != nil {
		return nil, false, err
	}
	if write == nil {
		write = s.writeAlone
	}
	err = write(ctx, msg, filter)
	if err == nil {
		return ev, true, nil
	}
	if !IsWrongLastSequence(err) {
		return nil, false, fmt.Errorf("store terminal record of %s: %w", ev.RequestID, err)
	}
	stored, err := s.Lookup(ctx, ev.RequestID)
	if err != nil {
		return nil, false, fmt.Errorf("read terminal record of %s after a refused write: %w", ev.RequestID, err)
	}
	// A batch whose commit timed out may have stored this very record
	// before it was written again alone: that one is ours.
	return stored, sameRecord(stored, ev), nil
}

// RecordMsg is ev's terminal record as the runtime publishes it on topo,
// with its create-once expectation: no record yet on any outcome subject
// of the request (filter).
func RecordMsg(topo Topology, ev *schemas.OutcomeEvent) (msg *nats.Msg, filter string, err error) {
	data, err := schemas.MarshalOutcome(ev)
	if err != nil {
		return nil, "", fmt.Errorf("encode terminal record: %w", err)
	}
	msg = nats.NewMsg(topo.OutcomeSubject(string(ev.Outcome), ev.Persona, ev.RequestID))
	msg.Data = data
	filter = topo.OutcomeFilter(ev.RequestID)
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	msg.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, filter)
	return msg, filter, nil
}

// writeAlone publishes msg by itself, repeated while a cluster fails over,
// so completed work is recorded after the failover instead of released and
// run again.
func (s *Outcomes) writeAlone(ctx context.Context, msg *nats.Msg, _ string) error {
	_, err := s.js.PublishMsg(ctx, msg, leaderWait...)
	return err
}

// leaderWait are the options that repeat a terminal record write while a
// cluster elects a leader; made once, since every write uses them.
var leaderWait = streams.WaitForLeader(streams.LeaderWait)

// IsWrongLastSequence: the server refused a create-once write because a
// record exists (R1 and R>1 report it with different codes).
func IsWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// Lookup reads the terminal record of requestID; ErrNoOutcome if none.
func (s *Outcomes) Lookup(ctx context.Context, requestID string) (*schemas.OutcomeEvent, error) {
	st, err := s.Stream(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := st.GetLastMsgForSubject(ctx, s.topo.OutcomeFilter(requestID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, ErrNoOutcome
	}
	if err != nil {
		return nil, fmt.Errorf("read terminal record of %s: %w", requestID, err)
	}
	ev, err := schemas.DecodeOutcome(raw.Data)
	if err != nil {
		return nil, fmt.Errorf("terminal record of %s (seq %d): %w", requestID, raw.Sequence, err)
	}
	return ev, nil
}

// KeepOutput puts out into ev: inline when small, otherwise in the outputs
// bucket under a content-addressed name, so a losing writer's different
// answer can never replace the one a record references.
func (s *Outcomes) KeepOutput(ctx context.Context, ev *schemas.OutcomeEvent, out []byte) error {
	if len(out) == 0 {
		return nil
	}
	out = asJSON(out)
	if len(out) <= s.topo.InlineOutputMax {
		ev.Output = out
		return nil
	}
	ob, err := s.bucket(ctx)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(out)
	name := RequestKey(ev.RequestID) + "." + hex.EncodeToString(sum[:8])
	info, err := ob.Put(ctx, jetstream.ObjectMeta{Name: name, Description: "output of request " + ev.RequestID}, bytes.NewReader(out))
	if err != nil {
		return fmt.Errorf("store output of %s (%d bytes): %w", ev.RequestID, len(out), err)
	}
	ev.OutputRef = &schemas.ObjectRef{Bucket: s.topo.OutputsBucket, Name: name, Size: int64(info.Size), Digest: info.Digest}
	return nil
}

// ReadOutput returns the answer a record carries, inline or referenced,
// byte for byte; the object store checks the digest as it reads.
func (s *Outcomes) ReadOutput(ctx context.Context, ev *schemas.OutcomeEvent) ([]byte, error) {
	if ev.OutputRef == nil {
		return ev.Output, nil
	}
	ob, err := s.bucket(ctx)
	if err != nil {
		return nil, err
	}
	data, err := ob.GetBytes(ctx, ev.OutputRef.Name)
	if err != nil {
		return nil, fmt.Errorf("output of %s in %s/%s: %w", ev.RequestID, ev.OutputRef.Bucket, ev.OutputRef.Name, err)
	}
	return data, nil
}

// asJSON keeps a handler's answer valid JSON inside the record: anything
// that is not JSON becomes a JSON string of its text.
func asJSON(out []byte) []byte {
	if json.Valid(out) {
		return out
	}
	b, _ := json.Marshal(string(out))
	return b
}

// sameRecord reports whether stored is ev, written by this call.
func sameRecord(stored, ev *schemas.OutcomeEvent) bool {
	return stored.Outcome == ev.Outcome && stored.Persona == ev.Persona && stored.Attempts == ev.Attempts &&
		stored.At.Equal(ev.At) && stored.RequestDigest == ev.RequestDigest
}
