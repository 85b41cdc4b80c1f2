// Package streams provisions JetStream streams the way every personaq
// replica does at start: idempotently, and without rewriting a stream that
// is already as wanted.
package streams

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Ensure creates the stream cfg names, or updates it when a field cfg sets
// differs from the stream's. A stream already as wanted is left alone:
// replicas starting together then send no update, which would rewrite the
// stream's store configuration on the server while another replica creates
// its consumer on it, and publish a needless config-change advisory.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	s, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, cfg)
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return wrap(cfg, err)
		}
		// Another replica created it meanwhile: compare with theirs.
		s, err = js.Stream(ctx, cfg.Name)
	}
	if err != nil {
		return wrap(cfg, err)
	}
	if covers(s.CachedInfo().Config, cfg) {
		return nil
	}
	_, err = js.UpdateStream(ctx, cfg)
	return wrap(cfg, err)
}

// ErrNoRoom is what Ensure's error matches (errors.Is) when the server's
// JetStream limits cannot hold the stream: its max_memory (memory storage)
// or max_file (file storage) is smaller than what the streams' max_bytes
// together reserve.
var ErrNoRoom = errors.New("the JetStream server has no room for the stream")

// The JetStream API's error codes for a stream that does not fit
// (nats-server's JSInsufficientResourcesErr, JSMemoryResourcesExceededErr
// and JSStorageResourcesExceededErr; nats.go names none of them).
const (
	codeInsufficientResources jetstream.ErrorCode = 10023
	codeMemoryExceeded        jetstream.ErrorCode = 10028
	codeStorageExceeded       jetstream.ErrorCode = 10047
)

func wrap(cfg jetstream.StreamConfig, err error) error {
	if err == nil {
		return nil
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode {
		case codeInsufficientResources, codeMemoryExceeded, codeStorageExceeded:
			limit := "max_file"
			if cfg.Storage == jetstream.MemoryStorage {
				limit = "max_memory"
			}
			return fmt.Errorf("provision stream %s (%s storage, max_bytes %d): %w: raise the server's JetStream %s, or lower the stream's max_bytes: %w",
				cfg.Name, strings.ToLower(cfg.Storage.String()), cfg.MaxBytes, ErrNoRoom, limit, err)
		}
	}
	return fmt.Errorf("provision stream %s: %w", cfg.Name, err)
}

// covers reports whether have already is what want asks for: every field
// personaq sets, with the server's defaults for what want leaves zero.
func covers(have, want jetstream.StreamConfig) bool {
	return have.Description == want.Description &&
		slices.Equal(sorted(have.Subjects), sorted(want.Subjects)) &&
		have.Retention == want.Retention &&
		have.Storage == want.Storage &&
		max(have.Replicas, 1) == max(want.Replicas, 1) &&
		have.MaxAge == want.MaxAge &&
		(want.MaxBytes == 0 || have.MaxBytes == want.MaxBytes && have.Discard == want.Discard) &&
		(want.Duplicates == 0 || have.Duplicates == want.Duplicates) &&
		(!want.AllowAtomicPublish || have.AllowAtomicPublish)
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// LeaderWait is how long a write that ends a request waits for its stream
// to have a leader: a cluster failing over has none for a few seconds.
const LeaderWait = 8 * time.Second

// WaitForLeader makes a publish repeat itself while the stream has no
// leader (no responders), for up to d, instead of failing at once.
// d <= 0: nats.go's default (about half a second).
func WaitForLeader(d time.Duration) []jetstream.PublishOpt {
	const every = 250 * time.Millisecond
	if d <= 0 {
		return nil
	}
	return []jetstream.PublishOpt{jetstream.WithRetryWait(every), jetstream.WithRetryAttempts(int(d / every))}
}
