package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/saga"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

func init() { register(newCompensateCmd) }

func newCompensateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "compensate",
		Short: "Publish saga compensations and sweep them (a failed compensation is QUARANTINED, never COMPENSATED)",
		Long: `A compensation undoes what a failed saga left behind (DELETE_BRANCH, REMOVE_WORKTREE, …).
A sweep runs every pending one under its retry policy (a retry is the request's redelivery
after the policy's delay). A saga ends COMPENSATED only when its handler succeeded; a handler that fails for good — or a kind without a handler —
leaves it QUARANTINED with a reason naming the kind and target, and a compensation_failed
quarantine record. A second sweep is a no-op for terminal sagas, one failing saga never
stops the others, and the sweep exits 1 when any saga failed.`,
	}
	cmd.AddCommand(newCompensatePublishCmd(g), newCompensateSweepCmd(g), newCompensateLsCmd(g))
	return cmd
}

func newCompensatePublishCmd(g *globals) *cobra.Command {
	var sagaID, kind, target, task, id, args, output string
	cmd := &cobra.Command{
		Use:   "publish --saga ID --kind KIND --target T",
		Short: "Publish a compensation request; the saga is recorded RUNNING",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := qCheckOutput(output); err != nil {
				return err
			}
			req := &schemas.CompensationRequest{
				SchemaVersion: schemas.Version, RequestID: id, SagaID: sagaID, Kind: schemas.CompensationKind(kind),
				Target: target, TaskID: task, CreatedAt: time.Now().UTC(),
			}
			if req.RequestID == "" {
				req.RequestID = uuid.NewString()
			}
			if args != "" {
				raw, err := readInput(args, cmd.InOrStdin())
				if err != nil {
					return errors.New(strings.Replace(err.Error(), "--input", "--args", 1))
				}
				req.Args = raw
			}
			if _, err := schemas.Encode(req); err != nil {
				return fmt.Errorf("invalid compensation request: %w", err)
			}
			nc, js, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer nc.Close()
			ack, sg, err := saga.Publish(cmd.Context(), js, saga.Topology{}, req)
			if err != nil {
				return err
			}
			if output == "json" {
				return qWriteJSON(g.stdout, map[string]any{"request_id": req.RequestID, "stream": ack.Stream,
					"sequence": ack.Sequence, "duplicate": ack.Duplicate, "saga": sg})
			}
			fmt.Fprintf(g.stdout, "published compensation %s %s for saga %s: stream %s seq %d (request %s)\n",
				req.Kind, req.Target, req.SagaID, ack.Stream, ack.Sequence, req.RequestID)
			if sg != nil && sg.State.Terminal() {
				fmt.Fprintf(g.stdout, "note: saga %s is already %s; a sweep will not run it again\n", sg.ID, sg.State)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&sagaID, "saga", "", "saga id (required)")
	fl.StringVar(&kind, "kind", "", "compensation kind, e.g. DELETE_BRANCH, REMOVE_WORKTREE (required)")
	fl.StringVar(&target, "target", "", "what the compensation acts on, e.g. a branch (required)")
	fl.StringVar(&task, "task", "", "task id")
	fl.StringVar(&id, "id", "", "request id (default: random); republishing the same id is deduplicated")
	fl.StringVar(&args, "args", "", "arguments for the handler: JSON text, @file, or - for stdin")
	fl.StringVarP(&output, "output", "o", "text", "output: text|json")
	for _, f := range []string{"saga", "kind", "target"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

type compensateSweepFlags struct {
	handlers []string
	demo     bool
	attempts int
	timeout  time.Duration
	maxWait  time.Duration
	output   string
}

func newCompensateSweepCmd(g *globals) *cobra.Command {
	var f compensateSweepFlags
	cmd := &cobra.Command{
		Use:   "sweep --handler KIND=COMMAND… | --demo",
		Short: "Run every pending compensation; exit 1 when any saga failed",
		Long: `sweep runs each pending compensation with the handler registered for its kind.
--handler KIND=COMMAND runs COMMAND (split on spaces) with the target as its last
argument, and PERSONAQ_SAGA_ID, PERSONAQ_COMPENSATION_KIND, PERSONAQ_TARGET,
PERSONAQ_REQUEST_ID and PERSONAQ_TASK_ID in its environment. Exit 0 is success;
75 (EX_TEMPFAIL), 69 (EX_UNAVAILABLE), and 137 and 143 (a child killed by SIGKILL or
SIGTERM, as a shell reports it) are retried under the policy (default: 2 attempts);
any other code fails for good. The end of stderr is the error text.

A failed attempt is retried when the broker redelivers its request after the retry
policy's delay; the sweep waits for scheduled retries up to --max-wait, then lists
the sagas still retrying (a later sweep, or a replica running compensations, finishes
them) and exits 6. It exits 1 when any saga failed, whatever else happened.

--demo registers built-in handlers instead: REMOVE_WORKTREE always succeeds;
DELETE_BRANCH refuses main, master and release/* ("protected branch").

A saga whose kind has no handler is quarantined, never left running.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := qCheckOutput(f.output); err != nil {
				return err
			}
			hs, err := f.registry()
			if err != nil {
				return err
			}
			nc, js, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer nc.Close()
			if err := compEnsureQuarantine(cmd.Context(), js); err != nil {
				return err
			}
			log, _ := g.logger()
			pol := retry.LocalPolicy()
			pol.MaxAttempts, pol.AttemptTimeout = f.attempts, f.timeout
			r, err := saga.NewRunner(saga.Config{JetStream: js, Handlers: hs, Policy: pol, Logger: &log,
				Writer: dlq.NewWriter(js, wire.Topology{}.WithDefaults().QuarantineSubject, dlq.WithWriterLogger(&log))})
			if err != nil {
				return err
			}
			rep, err := r.Sweep(cmd.Context(), f.maxWait)
			if f.output == "json" {
				if jerr := qWriteJSON(g.stdout, rep); jerr != nil {
					return jerr
				}
			} else {
				compPrintSweep(g.stdout, rep)
			}
			if err != nil {
				return err
			}
			if rep.Failed() {
				return &ExitError{Code: 1, Err: fmt.Errorf("%d compensation(s) failed; see personaq quarantine ls --reason compensation_failed", len(rep.Errors))}
			}
			if rep.Unfinished() {
				return &ExitError{Code: exitDeadline, Err: fmt.Errorf("%d compensation(s) still retrying after --max-wait %s; a later sweep finishes them", len(rep.Retrying), f.maxWait)}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&f.handlers, "handler", nil, "KIND=COMMAND: run COMMAND with the target as last argument (repeatable)")
	fl.BoolVar(&f.demo, "demo", false, "use the built-in demo handlers (DELETE_BRANCH refuses main, master, release/*)")
	fl.IntVar(&f.attempts, "attempts", 2, "attempts per compensation (the local preset's 2)")
	fl.DurationVar(&f.timeout, "attempt-timeout", 2*time.Minute, "timeout of one attempt")
	fl.DurationVar(&f.maxWait, "max-wait", saga.DefaultMaxWait, "how long to wait for scheduled retries before leaving them to a later sweep")
	fl.StringVarP(&f.output, "output", "o", "text", "output: text|json")
	return cmd
}

func (f compensateSweepFlags) registry() (map[schemas.CompensationKind]saga.Func, error) {
	if f.attempts < 1 || f.attempts > retry.MaxAttemptsLimit {
		return nil, fmt.Errorf("invalid flag --attempts: %d (want 1..%d)", f.attempts, retry.MaxAttemptsLimit)
	}
	if f.timeout <= 0 {
		return nil, fmt.Errorf("invalid flag --attempt-timeout: %s (want > 0)", f.timeout)
	}
	if f.maxWait <= 0 {
		return nil, fmt.Errorf("invalid flag --max-wait: %s (want > 0)", f.maxWait)
	}
	hs := map[schemas.CompensationKind]saga.Func{}
	if f.demo {
		hs[schemas.CompensationRemoveWorktree] = func(context.Context, *schemas.CompensationRequest) error { return nil }
		hs[schemas.CompensationDeleteBranch] = compDemoDeleteBranch
	}
	for _, h := range f.handlers {
		kind, command, ok := strings.Cut(h, "=")
		argv := strings.Fields(command)
		if !ok || len(argv) == 0 || kind == "" || strings.ToUpper(kind) != kind {
			return nil, fmt.Errorf("invalid flag --handler: %q (want KIND=COMMAND, e.g. DELETE_BRANCH='git push origin --delete')", h)
		}
		hs[schemas.CompensationKind(kind)] = compCommand(argv)
	}
	if len(hs) == 0 {
		return nil, errors.New("no compensation handlers: pass --handler KIND=COMMAND (repeatable) or --demo; " +
			"without one every pending saga would be quarantined as unhandled")
	}
	return hs, nil
}

func compDemoDeleteBranch(_ context.Context, req *schemas.CompensationRequest) error {
	if req.Target == "main" || req.Target == "master" || strings.HasPrefix(req.Target, "release/") {
		return handlers.Terminal(errors.New("protected branch"))
	}
	return nil
}

// compCommand runs argv + target; the exit code picks the class.
func compCommand(argv []string) saga.Func {
	return func(ctx context.Context, req *schemas.CompensationRequest) error {
		cmd := exec.CommandContext(ctx, argv[0], append(argv[1:len(argv):len(argv)], req.Target)...)
		cmd.Env = append(os.Environ(), "PERSONAQ_SAGA_ID="+req.SagaID, "PERSONAQ_COMPENSATION_KIND="+string(req.Kind),
			"PERSONAQ_TARGET="+req.Target, "PERSONAQ_REQUEST_ID="+req.RequestID, "PERSONAQ_TASK_ID="+req.TaskID)
		var stderr bytes.Buffer
		cmd.Stderr, cmd.Stdout = &stderr, io.Discard
		cmd.WaitDelay = 2 * time.Second
		err := cmd.Run()
		if err == nil {
			return nil
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return handlers.Terminal(fmt.Errorf("%s: %w", argv[0], err))
		}
		msg := qTail(strings.TrimSpace(stderr.String()), 512)
		if msg == "" {
			msg = ee.Error()
		}
		e := errors.New(msg)
		switch handlers.DefaultExitCodes()[ee.ExitCode()] {
		case retry.ClassRetryable:
			return handlers.Retryable(e)
		case retry.ClassNetwork:
			return handlers.Network(e)
		}
		if ctx.Err() != nil {
			return handlers.Timeout(e)
		}
		return handlers.Terminal(e)
	}
}

func qTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func compPrintSweep(w io.Writer, rep *saga.Report) {
	fmt.Fprintf(w, "compensation sweep: %d compensated, %d failed", len(rep.Recovered), len(rep.Errors))
	if rep.Unfinished() {
		fmt.Fprintf(w, ", %d still retrying", len(rep.Retrying))
	}
	fmt.Fprintln(w)
	for _, id := range rep.Recovered {
		fmt.Fprintf(w, "  compensated  %s\n", id)
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(w, "  FAILED       %s\n", e)
	}
	for _, e := range rep.Retrying {
		fmt.Fprintf(w, "  RETRYING     %s\n", e)
	}
}

// compEnsureQuarantine provisions personaq's streams when the quarantine
// stream is missing (compensation_failed records go there); an existing
// one is left as configured.
func compEnsureQuarantine(ctx context.Context, js jetstream.JetStream) error {
	topo := wire.Topology{}.WithDefaults()
	if _, err := js.Stream(ctx, topo.QuarantineStream); errors.Is(err, jetstream.ErrStreamNotFound) {
		return consumers.Provision(ctx, js, topo, nil)
	} else if err != nil {
		return fmt.Errorf("quarantine stream %s: %w", topo.QuarantineStream, err)
	}
	return nil
}

func newCompensateLsCmd(g *globals) *cobra.Command {
	var output string
	var running bool
	cmd := &cobra.Command{
		Use:   "ls [--running]",
		Short: "List recorded sagas and their states",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := qCheckOutput(output); err != nil {
				return err
			}
			nc, js, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer nc.Close()
			sagas, err := saga.List(cmd.Context(), js, saga.Topology{})
			if errors.Is(err, saga.ErrNotProvisioned) {
				sagas, err = nil, nil
			}
			if err != nil {
				return err
			}
			if running {
				sagas = slices.DeleteFunc(sagas, func(sg *saga.Saga) bool { return sg.State.Terminal() })
			}
			if output == "json" {
				if sagas == nil {
					sagas = []*saga.Saga{}
				}
				return qWriteJSON(g.stdout, sagas)
			}
			if len(sagas) == 0 {
				fmt.Fprintln(g.stdout, "no sagas recorded")
				return nil
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SAGA\tSTATE\tKIND\tTARGET\tATTEMPTS\tQUARANTINE SEQ\tREASON")
			for _, sg := range sagas {
				q := "-"
				if sg.QuarantineSeq > 0 {
					q = fmt.Sprint(sg.QuarantineSeq)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", sg.ID, sg.State, sg.Kind, sg.Target, sg.Attempts, q, qDash(qOneLine(sg.TerminalReason, 80)))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&running, "running", false, "only sagas still RUNNING")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output: text|json")
	return cmd
}
