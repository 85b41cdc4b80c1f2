// Package streams provisions JetStream streams the way every personaq
// replica does at start: idempotently, and without rewriting a stream that
// is already as wanted.
package streams

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
			return wrap(cfg.Name, err)
		}
		// Another replica created it meanwhile: compare with theirs.
		s, err = js.Stream(ctx, cfg.Name)
	}
	if err != nil {
		return wrap(cfg.Name, err)
	}
	if covers(s.CachedInfo().Config, cfg) {
		return nil
	}
	_, err = js.UpdateStream(ctx, cfg)
	return wrap(cfg.Name, err)
}

func wrap(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("provision stream %s: %w", name, err)
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
