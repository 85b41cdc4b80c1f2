package wire

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// OutputTopology names and bounds the live output stream: the chunks of
// text attempts write while they run (schemas.OutputChunk). The zero value
// is completed by Topology.WithDefaults.
//
// The stream keeps memory storage whatever Topology.Storage says: chunks
// are for watching (the terminal record holds the output a caller acts
// on), and on file storage under sync_interval always every chunk would
// cost an fsync — a streaming attempt publishes one every 25 ms. A server
// restart forgets them; a caller then sees the terminal record only.
type OutputTopology struct {
	// Stream holds output chunks. Default: "PERSONAQ_OUTPUT".
	Stream string
	// Prefix: chunks go to <prefix>.<request key>.<attempt>.
	// Default: "personaq.output".
	Prefix string
	// MaxAge bounds how long chunks are kept. Default: 1h.
	MaxAge time.Duration
	// MaxBytes bounds the stream's memory: past it the oldest chunks are
	// discarded (a caller resuming that far back finds a gap in the
	// offsets). Default: 256 MiB.
	MaxBytes int64
	// AttemptMax caps the live output of one attempt (of a request: a
	// retry's output supersedes the earlier attempt's). Past it the rest is
	// dropped and counted: one marker chunk says so, and the final chunk
	// carries the count; the persona is never blocked. Default: 1 MiB.
	AttemptMax int64
}

// Defaults of OutputTopology.
const (
	DefaultOutputMaxAge     = time.Hour
	DefaultOutputMaxBytes   = 256 << 20
	DefaultOutputAttemptMax = 1 << 20
)

func (o OutputTopology) withDefaults() OutputTopology {
	if o.Stream == "" {
		o.Stream = schemas.DefaultOutputStream
	}
	if o.Prefix == "" {
		o.Prefix = schemas.DefaultOutputPrefix
	}
	if o.MaxAge == 0 {
		o.MaxAge = DefaultOutputMaxAge
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultOutputMaxBytes
	}
	if o.AttemptMax == 0 {
		o.AttemptMax = DefaultOutputAttemptMax
	}
	return o
}

func (o OutputTopology) validate() error {
	for _, f := range []struct {
		field string
		v     int64
	}{{"topology.output_max_age", int64(o.MaxAge)}, {"topology.output_max_bytes", o.MaxBytes}, {"topology.output_attempt_max", o.AttemptMax}} {
		if f.v < 0 {
			return fmt.Errorf("%w: %s must not be negative", ErrInvalidConfig, f.field)
		}
	}
	return nil
}

// OutputSubject is where the chunks of attempt of request requestID go.
func (t Topology) OutputSubject(requestID string, attempt int) string {
	return schemas.OutputSubject(t.Output.Prefix, RequestKey(requestID), attempt)
}

// OutputFilter matches every output chunk of request requestID.
func (t Topology) OutputFilter(requestID string) string {
	return schemas.OutputFilter(t.Output.Prefix, RequestKey(requestID))
}

// OutputStreamConfig is the live output stream (see OutputTopology).
func OutputStreamConfig(t Topology) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: t.Output.Stream, Subjects: []string{t.Output.Prefix + ".>"}, Replicas: t.Replicas,
		Storage: jetstream.MemoryStorage, MaxAge: t.Output.MaxAge, MaxBytes: t.Output.MaxBytes,
		Discard:     jetstream.DiscardOld,
		Description: "personaq live output chunks, for callers following a running request",
	}
}
