package consumers

import (
	"context"
	"time"

	"github.com/personaq/personaq/consumers/flow"
	"github.com/personaq/personaq/consumers/loop"
)

// watchCircuits keeps this replica's view of the shared circuit states.
func (r *Runtime) watchCircuits(ctx context.Context) {
	var flows []*personaFlow
	for _, p := range r.personas {
		if p.flow != nil && p.flow.breaker != nil {
			flows = append(flows, p.flow)
		}
	}
	if len(flows) == 0 {
		return
	}
	poll := func() {
		for _, f := range flows {
			pctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
			st, err := r.cfg.Circuits.Status(pctx, f.persona)
			cancel()
			if err != nil {
				f.storeError(err, "circuit state not read")
				continue
			}
			f.setStatus(st, "poll")
		}
	}
	poll()
	loop.Every(ctx, flowPoll, poll)
}

// watchBacklog reports each persona's runnable backlog: the requests
// KEDA's JetStream scaler would count (NumPending + NumAckPending) that
// could start now. None can while the circuit is open or half-open or
// while the limiter cools down; with a requests-per-minute limiter, no
// more than one minute of its starts can.
func (r *Runtime) watchBacklog(ctx context.Context) {
	o, ok := r.obs.(FlowObserver)
	if !ok {
		return
	}
	measure := func() {
		for _, p := range r.personas {
			n, ok := r.runnable(ctx, p)
			if ok {
				o.RunnableBacklog(p.name, n)
			}
		}
	}
	measure()
	interval := r.backlogEvery
	if interval == 0 {
		interval = backlogInterval
	}
	loop.Every(ctx, interval, measure)
}

func (r *Runtime) runnable(ctx context.Context, p *personaRuntime) (int, bool) {
	ictx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	c, err := r.js.Consumer(ictx, r.topo.RequestsStream, Durable(p.name))
	if err != nil {
		return 0, false
	}
	info := c.CachedInfo()
	n := int(info.NumPending) + info.NumAckPending
	f := p.flow
	if f == nil {
		return n, true
	}
	if f.limiter != "" {
		if left, err := f.lim.Cooling(ictx, f.limiter); err == nil {
			f.mu.Lock()
			f.coolUntil = time.Now().Add(left)
			f.mu.Unlock()
		}
		if lim, _ := f.lim.Limit(f.limiter); lim.RequestsPerMinute > 0 {
			n = min(n, lim.RequestsPerMinute)
		}
	}
	f.mu.Lock()
	closed := f.status.State == flow.Closed
	f.mu.Unlock()
	if why, _ := f.blocked(time.Now()); why != "" || !closed {
		return 0, true
	}
	return n, true
}
