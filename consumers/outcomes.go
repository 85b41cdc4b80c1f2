package consumers

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/streams"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

// Outcomes is the runtime's writer of terminal records: wire.Outcomes
// (the create-once write, lookups, outputs) with the batcher that commits
// the records of concurrent completions together (batch.go).
type Outcomes struct {
	*wire.Outcomes
	js jetstream.JetStream

	mu sync.Mutex
	// batch commits records of concurrent completions together; nil: each
	// record is written alone.
	batch *recordBatcher
}

func newOutcomes(js jetstream.JetStream, t Topology) *Outcomes {
	return &Outcomes{Outcomes: wire.NewOutcomes(js, t), js: js}
}

func (s *Outcomes) outcomes(ctx context.Context) (jetstream.Stream, error) { return s.Stream(ctx) }

// create stores ev as the request's terminal record unless one exists,
// batched when batching is on. It returns the record that stands and
// whether it is ev.
func (s *Outcomes) create(ctx context.Context, ev *schemas.OutcomeEvent) (*schemas.OutcomeEvent, bool, error) {
	return s.Create(ctx, ev, s.write)
}

func (s *Outcomes) write(ctx context.Context, msg *nats.Msg, filter string) error {
	if b := s.batcher(); b != nil {
		return b.write(ctx, msg, filter)
	}
	_, err := s.js.PublishMsg(ctx, msg, leaderWait...)
	return err
}

func (s *Outcomes) keepOutput(ctx context.Context, ev *schemas.OutcomeEvent, out []byte) error {
	return s.KeepOutput(ctx, ev, out)
}

// leaderWait are the options that repeat a record write while a cluster
// elects a leader; made once, since every write uses them.
var leaderWait = streams.WaitForLeader(streams.LeaderWait)
