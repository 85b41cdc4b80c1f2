package dlq

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// CaptureFailure is a crash-looping message the max-deliveries listener
// (package consumers/advisory) could not move to the quarantine (yet). The
// message stays in its stream; its advisory is tried again with a growing
// delay and every sweep tries it too, so a cause that goes away (a
// permission granted, a bucket recreated) ends it. The listener counts them
// with Writer.NoteCaptureFailure; `personaq quarantine stats` lists them
// (Stats.CaptureFailing).
type CaptureFailure struct {
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
	// Failures counts the failed captures so far.
	Failures int `json:"failures"`
	// Error is the last failure's error.
	Error string `json:"error"`
	// At is when the last failure happened.
	At time.Time `json:"at"`
}

// failurePrefix starts the index keys of capture failures; record ids
// start with "q.", so the two never meet.
const failurePrefix = "failed."

func failureKey(stream string, seq uint64) string {
	return failurePrefix + indexKey(RecordID(stream, seq))
}

// NoteCaptureFailure counts a failed capture of the message at seq of
// stream in the quarantine index, with cause as its last error, and
// returns how many there were so far; 0 when the index is off or
// unreachable (logged): counting never fails a capture. It is bounded by
// the index timeout and not cut short by ctx's cancellation, so a capture
// that failed because its context ended is still counted.
func (w *Writer) NoteCaptureFailure(ctx context.Context, stream string, seq uint64, cause error) int {
	if w.idx == nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), indexTimeout)
	defer cancel()
	kv, err := w.idx.store(ctx)
	if err != nil {
		w.log.Warn().Err(err).Msg("quarantine index unavailable; capture failure not counted")
		return 0
	}
	f := CaptureFailure{Stream: stream, Seq: seq}
	key := failureKey(stream, seq)
	if e, err := kv.Get(ctx, key); err == nil {
		_ = json.Unmarshal(e.Value(), &f)
	}
	f.Failures++
	f.Error, f.At = cause.Error(), w.now().UTC()
	data, _ := json.Marshal(f)
	if _, err := kv.Put(ctx, key, data); err != nil {
		w.log.Warn().Err(err).Msg("quarantine index: capture failure not counted")
	}
	return f.Failures
}

// ClearCaptureFailure forgets the failures NoteCaptureFailure counted for
// the message at seq of stream, now captured (or gone from its stream). It
// is best effort: an index that cannot be reached keeps the count until
// the next clear.
func (w *Writer) ClearCaptureFailure(ctx context.Context, stream string, seq uint64) {
	if w.idx == nil {
		return
	}
	kv, err := w.idx.store(ctx)
	if err != nil {
		return
	}
	key := failureKey(stream, seq)
	if _, err := kv.Get(ctx, key); err == nil {
		_ = kv.Purge(ctx, key)
	}
}

// captureFailures lists the failures the index holds, oldest message
// first; none when there is no index bucket.
func (ix *index) captureFailures(ctx context.Context) ([]CaptureFailure, error) {
	kv, err := ix.js.KeyValue(ctx, ix.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("quarantine index bucket %s: %w", ix.bucket, err)
	}
	lister, err := kv.ListKeysFiltered(ctx, failurePrefix+">")
	if err != nil {
		return nil, fmt.Errorf("quarantine index %s: list capture failures: %w", ix.bucket, err)
	}
	var out []CaptureFailure
	for key := range lister.Keys() {
		e, err := kv.Get(ctx, key)
		if err != nil {
			continue // cleared meanwhile
		}
		var f CaptureFailure
		if json.Unmarshal(e.Value(), &f) == nil {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b CaptureFailure) int {
		return cmp.Or(strings.Compare(a.Stream, b.Stream), cmp.Compare(a.Seq, b.Seq))
	})
	return out, nil
}
