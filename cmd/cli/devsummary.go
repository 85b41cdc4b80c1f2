package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

// devSummary tracks the sample workload's requests until each has a
// terminal outcome.
type devSummary struct {
	w       io.Writer
	order   []string
	reqs    map[string]*schemas.PersonaRequest
	results map[string]*schemas.OutcomeEvent
}

func newDevSummary(w io.Writer) *devSummary {
	return &devSummary{w: w, reqs: map[string]*schemas.PersonaRequest{}, results: map[string]*schemas.OutcomeEvent{}}
}

func (s *devSummary) expect(req *schemas.PersonaRequest) {
	s.order = append(s.order, req.RequestID)
	s.reqs[req.RequestID] = req
}

func (s *devSummary) total() int   { return len(s.order) }
func (s *devSummary) settled() int { return len(s.results) }

// follow prints each outcome of the workload as it arrives. With --once it
// returns when all have settled (or fails after --settle-timeout); without,
// it runs until ctx is done.
func (s *devSummary) follow(ctx context.Context, events <-chan *schemas.OutcomeEvent, f devFlags) error {
	var deadline <-chan time.Time
	if f.once {
		deadline = time.After(f.timeout)
	}
	for !f.once || s.settled() < s.total() {
		select {
		case ev := <-events:
			s.record(ev)
		case <-deadline:
			return fmt.Errorf("workload did not settle within %s: %d of %d requests have an outcome", f.timeout, s.settled(), s.total())
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

func (s *devSummary) record(ev *schemas.OutcomeEvent) {
	if _, ours := s.reqs[ev.RequestID]; !ours {
		fmt.Fprintf(s.w, "  %-10s %-28s %s after %d attempt(s)\n", ev.Persona, ev.TaskID, outcomeLabel(ev.Outcome, ev.Reason), ev.Attempts)
		return
	}
	if _, seen := s.results[ev.RequestID]; seen {
		return
	}
	s.results[ev.RequestID] = ev
	fmt.Fprintf(s.w, "  [%d/%d] %-10s %-28s %s after %d attempt(s)\n",
		s.settled(), s.total(), ev.Persona, ev.TaskID, outcomeLabel(ev.Outcome, ev.Reason), ev.Attempts)
}

// table prints the final per-task summary.
func (s *devSummary) table() {
	tw := tabwriter.NewWriter(s.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nTASK\tPERSONA\tOUTCOME\tREASON\tATTEMPTS\tAGENT\tPROGRESS\tQUARANTINE SEQ")
	for _, id := range s.order {
		req, ev := s.reqs[id], s.results[id]
		if ev == nil {
			fmt.Fprintf(tw, "%s\t%s\tpending\t\t\t\t\t\n", req.TaskID, req.Persona)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", req.TaskID, req.Persona, ev.Outcome,
			dash(string(ev.Reason)), ev.Attempts, dash(ev.Agent), progressText(ev.Progress), seqText(ev.QuarantineSeq))
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func progressText(p *schemas.Progress) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%d", p.Completed, p.Total)
}

func seqText(seq uint64) string {
	if seq == 0 {
		return "-"
	}
	return fmt.Sprint(seq)
}

// watchOutcomes streams new outcome events (an ordered, ephemeral consumer).
func watchOutcomes(ctx context.Context, js jetstream.JetStream) (<-chan *schemas.OutcomeEvent, error) {
	topo := wire.Topology{}.WithDefaults()
	cons, err := js.OrderedConsumer(ctx, topo.OutcomesStream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("watch outcomes: %w", err)
	}
	out := make(chan *schemas.OutcomeEvent, 256)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if ev, err := schemas.DecodeOutcome(m.Data()); err == nil {
			out <- ev
		}
	})
	if err != nil {
		return nil, fmt.Errorf("watch outcomes: %w", err)
	}
	context.AfterFunc(ctx, cc.Stop)
	return out, nil
}

// demoNames is the order the demo personas are published and listed in.
var demoNames = slices.Clone([]string{"echo", "flaky", "validator", "terminal", "slowpoke", "plateau"})
