package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/personaq/personaq/cmd/config"
	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/wire"
)

func init() { register(newMigrateCmd) }

// ErrReplicasRunning: a replica still pulls from the stream to migrate.
var ErrReplicasRunning = errors.New("replicas still pull from the requests stream: stop every replica first")

// Headers a request keeps through the migration's holding stream.
const (
	headerMigratedSubject = "Personaq-Migrated-Subject"
	headerMigratedMsgID   = "Personaq-Migrated-Msg-Id"
)

func newMigrateCmd(g *globals) *cobra.Command {
	var path string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "migrate-requests [--config FILE]",
		Short: "Move a work-queue requests stream to limits retention, keeping every open request",
		Long: `migrate-requests moves a requests stream provisioned by an earlier personaq (work-queue
retention: every ack is a second fsync on the server) to limits retention, which the
server cannot change in place. Stop every replica first; callers may go on submitting:
while it runs their submits are refused (and sent again), never acknowledged and lost.

It seals the old stream, copies the open requests (a work queue holds nothing else) to a holding stream,
deletes the old stream, provisions the new one and copies them back with their
headers and message ids, then deletes the holding stream. Every step can be run
again: a run that stopped half-way resumes from the holding stream. A request that
ended before the migration (its ack lost) is settled from its terminal record when
delivered again, not run again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t := wire.Topology{}
			if path != "" {
				cfg, err := config.Load(path, os.LookupEnv)
				if err != nil {
					return err
				}
				t = cfg.Topology()
			}
			nc, js, err := g.connectCmd(cmd)
			if err != nil {
				return err
			}
			defer nc.Close()
			n, err := migrateRequests(cmd.Context(), js, t, wait, g.stdout)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "requests stream %s has limits retention; %d open requests moved\n", t.WithDefaults().RequestsStream, n)
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "configuration file (default: the default topology)")
	cmd.Flags().DurationVar(&wait, "wait", 5*time.Second, "how long to wait for stopped replicas' pull requests to expire")
	return cmd
}

// migrateRequests moves t's requests stream to limits retention through a
// holding stream and returns how many requests it moved.
func migrateRequests(ctx context.Context, js jetstream.JetStream, t wire.Topology, wait time.Duration, out io.Writer) (int, error) {
	t = t.WithDefaults()
	hold := holdStream(t)
	old, err := js.Stream(ctx, t.RequestsStream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
	case err != nil:
		return 0, fmt.Errorf("requests stream %s: %w", t.RequestsStream, err)
	case old.CachedInfo().Config.Retention == jetstream.WorkQueuePolicy:
		if err := holdRequests(ctx, js, old, hold, wait); err != nil {
			return 0, err
		}
		fmt.Fprintf(out, "open requests held in %s\n", hold.Name)
		if err := js.DeleteStream(ctx, t.RequestsStream); err != nil {
			return 0, fmt.Errorf("delete work-queue stream %s: %w", t.RequestsStream, err)
		}
	}
	if err := consumers.Provision(ctx, js, t, nil); err != nil {
		return 0, err
	}
	return restoreRequests(ctx, js, t, hold)
}

// holdStream is where the open requests wait while the requests stream is
// replaced: limits retention, one subject per request.
func holdStream(t wire.Topology) jetstream.StreamConfig {
	name := t.RequestsStream + "_MIGRATION"
	return jetstream.StreamConfig{
		Name: name, Subjects: []string{"personaq-migration." + t.RequestsStream + ".>"},
		Description: "personaq: open requests held while " + t.RequestsStream + " moves to limits retention",
		Retention:   jetstream.LimitsPolicy, Storage: t.Storage, Replicas: t.Replicas,
	}
}

// holdRequests copies every message of the work-queue stream old to the
// holding stream, once no replica pulls from old; a copy already held
// (a run resumed) is deduplicated by its sequence.
func holdRequests(ctx context.Context, js jetstream.JetStream, old jetstream.Stream, hold jetstream.StreamConfig, wait time.Duration) error {
	if err := waitIdle(ctx, old, wait); err != nil {
		return err
	}
	// Sealed, the old stream refuses every publish from here on: a caller
	// submitting now gets an error and sends again, instead of an
	// acknowledgement for a request stored after the copy and deleted with
	// the stream.
	if cfg := old.CachedInfo().Config; !cfg.Sealed {
		cfg.Sealed = true
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("seal work-queue stream %s: %w", cfg.Name, err)
		}
	}
	if _, err := js.CreateOrUpdateStream(ctx, hold); err != nil {
		return fmt.Errorf("holding stream %s: %w", hold.Name, err)
	}
	info, err := old.Info(ctx)
	if err != nil {
		return fmt.Errorf("requests stream %s: %w", old.CachedInfo().Config.Name, err)
	}
	prefix := strings.TrimSuffix(hold.Subjects[0], ">")
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; {
		raw, err := old.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return fmt.Errorf("read request %d: %w", seq, err)
		}
		m := nats.NewMsg(prefix + strconv.FormatUint(raw.Sequence, 10))
		m.Data = raw.Data
		copyHeaders(m.Header, raw.Header)
		m.Header.Set(headerMigratedSubject, raw.Subject)
		if id := raw.Header.Get(jetstream.MsgIDHeader); id != "" {
			m.Header.Set(headerMigratedMsgID, id)
		}
		if _, err := js.PublishMsg(ctx, m, jetstream.WithMsgID("hold-"+strconv.FormatUint(raw.Sequence, 10))); err != nil {
			return fmt.Errorf("hold request %d: %w", raw.Sequence, err)
		}
		seq = raw.Sequence + 1
	}
	h, err := js.Stream(ctx, hold.Name)
	if err != nil {
		return fmt.Errorf("holding stream %s: %w", hold.Name, err)
	}
	if got := h.CachedInfo().State.Msgs; got < info.State.Msgs {
		return fmt.Errorf("holding stream %s has %d requests of %d: nothing deleted", hold.Name, got, info.State.Msgs)
	}
	return nil
}

// waitIdle waits until no consumer of s has a pull request waiting (a
// stopped replica's expire within a second), at most wait.
func waitIdle(ctx context.Context, s jetstream.Stream, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		busy := ""
		l := s.ListConsumers(ctx)
		for ci := range l.Info() {
			if ci.NumWaiting > 0 {
				busy = fmt.Sprintf("%s has %d pull requests waiting", ci.Name, ci.NumWaiting)
			}
		}
		if err := l.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
			return fmt.Errorf("consumers of %s: %w", s.CachedInfo().Config.Name, err)
		}
		if busy == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s", ErrReplicasRunning, busy)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// restoreRequests publishes every held request on its own subject of the
// new requests stream (with its message id, so a copy resumed within the
// duplicate window is not stored twice), deleting each from the holding
// stream once stored, then the holding stream.
func restoreRequests(ctx context.Context, js jetstream.JetStream, t wire.Topology, hold jetstream.StreamConfig) (int, error) {
	h, err := js.Stream(ctx, hold.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("holding stream %s: %w", hold.Name, err)
	}
	n := 0
	for seq := uint64(1); ; {
		raw, err := h.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return n, fmt.Errorf("read held request %d: %w", seq, err)
		}
		m := nats.NewMsg(raw.Header.Get(headerMigratedSubject))
		m.Data = raw.Data
		copyHeaders(m.Header, raw.Header)
		m.Header.Del(headerMigratedSubject)
		m.Header.Del(headerMigratedMsgID)
		if id := raw.Header.Get(headerMigratedMsgID); id != "" {
			m.Header.Set(jetstream.MsgIDHeader, id)
		}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			return n, fmt.Errorf("restore request %s: %w", raw.Header.Get(headerMigratedSubject), err)
		}
		if err := h.DeleteMsg(ctx, raw.Sequence); err != nil {
			return n, fmt.Errorf("held request %d restored but not removed (run again): %w", raw.Sequence, err)
		}
		n++
		seq = raw.Sequence + 1
	}
	if err := js.DeleteStream(ctx, hold.Name); err != nil {
		return n, fmt.Errorf("delete holding stream %s: %w", hold.Name, err)
	}
	return n, nil
}

// copyHeaders copies a stored message's headers for publishing it again:
// the server's own (Nats-*: expectations, message id, batch, TTL) are left
// out; a request's personaq headers stay.
func copyHeaders(dst, src nats.Header) {
	for k, v := range src {
		if strings.HasPrefix(strings.ToLower(k), "nats-") {
			continue
		}
		dst[k] = append([]string(nil), v...)
	}
}
