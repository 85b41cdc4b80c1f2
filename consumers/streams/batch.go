package streams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// The atomic batch publish protocol of nats-server ≥ 2.12, written here
// rather than taken from a client library because it is three headers
// (nats-server v2.15.2, server/stream.go processJetStreamBatchMsg,
// JSBatchId/JSBatchSeq/JSBatchCommit):
//
//   - every message carries Nats-Batch-Id (≤ 64 chars) and
//     Nats-Batch-Sequence (1, 2, …, no gaps); the last one also carries
//     Nats-Batch-Commit: 1;
//   - messages before the commit may be sent without a reply subject (the
//     server stages them; a gap or an unknown batch abandons it), the
//     commit is a request whose reply is one publish ack for the batch, or
//     one error for the whole batch;
//   - at commit every message's headers are checked as a single publish's
//     would be (expected last sequence per subject included), and one
//     failure rejects them all: nothing is stored;
//   - on 2.15.x with file storage and sync_interval always the batch is
//     written whole and fsynced once (FlushAllPending after the loop); up
//     to 2.14.x it was fsynced per message.
//
// A batch covers one stream, at most 1000 messages (the server's default
// max_batch_size), and Nats-Expected-Last-Msg-Id is refused in it.

// Header names of the atomic batch protocol.
const (
	HeaderBatchID     = "Nats-Batch-Id"
	HeaderBatchSeq    = "Nats-Batch-Sequence"
	HeaderBatchCommit = "Nats-Batch-Commit"
)

// Error codes nats-server answers an atomic batch with (server/errors.json).
const (
	// ErrCodeAtomicPublishDisabled: the stream has no allow_atomic.
	ErrCodeAtomicPublishDisabled jetstream.ErrorCode = 10174
	// ErrCodeAtomicPublishIncomplete: a message of the batch was lost or
	// the batch timed out on the server.
	ErrCodeAtomicPublishIncomplete jetstream.ErrorCode = 10176
)

// MaxAtomicBatch is the largest batch PublishAtomic sends: the server's
// default max_batch_size.
const MaxAtomicBatch = 1000

// ErrBatchTooLarge: more than MaxAtomicBatch messages, or none.
var ErrBatchTooLarge = errors.New("atomic batch must hold 1 to 1000 messages")

// BatchAck is the server's answer to a committed batch.
type BatchAck struct {
	Stream string `json:"stream"`
	// Sequence is the stream sequence of the batch's last message; the
	// others precede it, in order.
	Sequence  uint64 `json:"seq"`
	BatchID   string `json:"batch"`
	BatchSize int    `json:"count"`
}

// PublishAtomic publishes msgs as one atomic batch: all stored, in order,
// or none. A refusal is returned as a *jetstream.APIError (the first
// failed check's, for the whole batch). msgs' headers are extended with
// the batch headers.
func PublishAtomic(ctx context.Context, nc *nats.Conn, msgs []*nats.Msg) (*BatchAck, error) {
	if len(msgs) == 0 || len(msgs) > MaxAtomicBatch {
		return nil, fmt.Errorf("%w: %d", ErrBatchTooLarge, len(msgs))
	}
	id := nuid.Next()
	for i, m := range msgs {
		if m.Header == nil {
			m.Header = nats.Header{}
		}
		m.Header.Set(HeaderBatchID, id)
		m.Header.Set(HeaderBatchSeq, strconv.Itoa(i+1))
		if i == len(msgs)-1 {
			break
		}
		// Staged without a reply: one connection keeps the order, and
		// the commit's answer covers every message before it.
		if err := nc.PublishMsg(m); err != nil {
			return nil, fmt.Errorf("atomic batch %s: stage message %d: %w", id, i+1, err)
		}
	}
	last := msgs[len(msgs)-1]
	last.Header.Set(HeaderBatchCommit, "1")
	resp, err := nc.RequestMsgWithContext(ctx, last)
	if err != nil {
		return nil, fmt.Errorf("atomic batch %s: commit: %w", id, err)
	}
	var out struct {
		BatchAck
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &out); err != nil {
		return nil, fmt.Errorf("atomic batch %s: decode ack: %w", id, err)
	}
	if out.Error != nil {
		return nil, fmt.Errorf("atomic batch %s of %d: %w", id, len(msgs), out.Error)
	}
	return &out.BatchAck, nil
}

// IsAPIError reports whether err carries a JetStream API error of code.
func IsAPIError(err error, code jetstream.ErrorCode) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == code
}

// ErrCodeStreamInvalidConfig: a stream update the server refuses, e.g. a
// change of retention to or from work queue.
const ErrCodeStreamInvalidConfig jetstream.ErrorCode = 10052
