package consumers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/advisory"
	"github.com/personaq/personaq/consumers/loop"
	"github.com/personaq/personaq/schemas"
)

// The requests stream has limits retention: an ack writes nothing on the
// server, and the acked requests stay stored until the trimmer purges them.
// It purges each persona's subject up to what is safe to forget, once per
// interval, never by age:
//
//   - the persona consumer's ack floor, as read one interval earlier: every
//     request at or below it was acked, termed, or given up at MaxDeliver
//     (the server moves the floor past those too);
//   - but never past a request whose MAX_DELIVERIES advisory still waits in
//     the advisory stream: the quarantine listener reads that request by
//     sequence. Reading the floor an interval before the advisories gives
//     the server's advisory that interval to be stored.
//
// A purge is one fsync whatever it removes, so the trim costs one fsync per
// persona per interval (per replica: every replica trims, and a purge up
// to a sequence already purged removes nothing), instead of one per ack.

// trimInterval is how often the trimmer purges each persona's subject.
const trimInterval = time.Second

// trimAdvisoriesMax bounds how many waiting advisories of one consumer the
// trimmer reads; past it the trim waits for the listener to catch up.
const trimAdvisoriesMax = 1000

// errTooManyAdvisories: more waiting advisories than the trimmer reads.
var errTooManyAdvisories = errors.New("too many MAX_DELIVERIES advisories waiting")

// trimKeep returns the first sequence of a persona's subject to keep, given
// the consumer's ack floor read one interval ago, the request sequences
// whose MAX_DELIVERIES advisories wait, and the first sequence the last
// purge kept; ok is false when there is nothing new to purge.
func trimKeep(floor uint64, waiting []uint64, kept uint64) (keep uint64, ok bool) {
	keep = floor + 1
	for _, seq := range waiting {
		keep = min(keep, seq)
	}
	return keep, keep > max(kept, 1)
}

// trimmer is one replica's trim loop state.
type trimmer struct {
	r        *Runtime
	requests jetstream.Stream
	advisory jetstream.Stream
	// floor is each persona's ack floor read at the previous tick; kept is
	// the first sequence its last purge kept.
	floor map[string]uint64
	kept  map[string]uint64
}

// startTrim runs the trimmer every interval until ctx ends; stop waits
// for it.
func (r *Runtime) startTrim(ctx context.Context, interval time.Duration) (stop func()) {
	t := &trimmer{r: r, floor: map[string]uint64{}, kept: map[string]uint64{}}
	var g loop.Group
	g.Start(ctx, func(ctx context.Context) { loop.Every(ctx, interval, func() { t.pass(ctx) }) })
	return g.Stop
}

// pass trims every persona this replica serves.
func (t *trimmer) pass(ctx context.Context) {
	if err := t.streams(ctx); err != nil {
		t.r.log.Warn().Err(err).Msg("request trim skipped: streams not readable")
		return
	}
	for name := range t.r.personas {
		if err := t.trim(ctx, name); err != nil && ctx.Err() == nil {
			t.r.log.Warn().Err(err).Str("persona", name).Msg("request trim skipped; nothing removed")
		}
	}
}

func (t *trimmer) streams(ctx context.Context) error {
	var err error
	if t.requests == nil {
		if t.requests, err = t.r.js.Stream(ctx, t.r.topo.RequestsStream); err != nil {
			return fmt.Errorf("requests stream %s: %w", t.r.topo.RequestsStream, err)
		}
	}
	if t.advisory == nil {
		if t.advisory, err = t.r.js.Stream(ctx, schemas.DefaultAdvisoryStream); err != nil {
			return fmt.Errorf("advisory stream %s: %w", schemas.DefaultAdvisoryStream, err)
		}
	}
	return nil
}

// trim purges persona's acked requests up to trimKeep.
func (t *trimmer) trim(ctx context.Context, persona string) error {
	c, err := t.r.js.Consumer(ctx, t.r.topo.RequestsStream, Durable(persona))
	if err != nil {
		return fmt.Errorf("consumer %s: %w", Durable(persona), err)
	}
	floor := t.floor[persona]
	t.floor[persona] = c.CachedInfo().AckFloor.Stream
	if floor == 0 {
		return nil
	}
	waiting, err := t.waitingAdvisories(ctx, persona)
	if err != nil {
		return err
	}
	keep, ok := trimKeep(floor, waiting, t.kept[persona])
	if !ok {
		return nil
	}
	subject := t.r.topo.RequestSubject(persona)
	if err := t.requests.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(keep)); err != nil {
		return fmt.Errorf("purge %s below %d: %w", subject, keep, err)
	}
	t.kept[persona] = keep
	t.r.log.Debug().Str("persona", persona).Uint64("kept_from", keep).Int("advisories_waiting", len(waiting)).Msg("acked requests trimmed")
	return nil
}

// waitingAdvisories returns the request sequences of persona's
// MAX_DELIVERIES advisories the quarantine listener has not handled yet
// (the advisory stream is a work queue: a handled one is gone).
func (t *trimmer) waitingAdvisories(ctx context.Context, persona string) ([]uint64, error) {
	subject := strings.TrimSuffix(advisory.MaxDeliveriesSubject(t.r.topo.RequestsStream), "*") + Durable(persona)
	var out []uint64
	for seq := uint64(1); ; {
		raw, err := t.advisory.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read advisories of %s: %w", Durable(persona), err)
		}
		if len(out) == trimAdvisoriesMax {
			return nil, fmt.Errorf("%w: over %d for %s", errTooManyAdvisories, trimAdvisoriesMax, Durable(persona))
		}
		var adv advisory.Advisory
		if err := json.Unmarshal(raw.Data, &adv); err != nil {
			return nil, fmt.Errorf("advisory %d of %s: %w", raw.Sequence, Durable(persona), err)
		}
		out = append(out, adv.StreamSeq)
		seq = raw.Sequence + 1
	}
}
