package consumers

import (
	"context"
	"time"

	"github.com/personaq/personaq/consumers/transport"
)

// ledgerGate is a persona's pull gate when the runtime has a ledger: while
// the last ledger call found it unreachable (health.ledgerDown, cleared by
// the next call that answers: a held delivery's Begin or the periodic
// ping), nothing is pulled, so no request is delivered only to be held or
// released. Otherwise the persona's flow control (inner, may be nil)
// decides.
type ledgerGate struct {
	r       *Runtime
	persona string
	inner   transport.Gate
}

// gateFor is the pull gate of persona p: the ledger's, then flow control's.
func (r *Runtime) gateFor(p *personaRuntime) transport.Gate {
	if r.ledger == nil {
		return p.gate()
	}
	return ledgerGate{r: r, persona: p.name, inner: p.gate()}
}

// Admit implements transport.Gate.
func (g ledgerGate) Admit(ctx context.Context, n int) (int, time.Duration) {
	if g.r.health.ledgerDown.Load() {
		if ok, held := g.r.quiet.Allow("ledger-gate/" + g.persona); ok {
			g.r.log.Warn().Str("persona", g.persona).Int("held_back", held).
				Msg("attempt ledger unreachable; pulling nothing until it is back (no request released or quarantined because of it)")
		}
		return 0, flowErrorWait
	}
	if g.inner == nil {
		return n, 0
	}
	return g.inner.Admit(ctx, n)
}

// Unused implements transport.Gate.
func (g ledgerGate) Unused(ctx context.Context, n int) {
	if g.inner != nil {
		g.inner.Unused(ctx, n)
	}
}
