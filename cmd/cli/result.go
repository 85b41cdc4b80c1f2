package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

func init() { register(newResultCmd) }

func newResultCmd(g *globals) *cobra.Command {
	var output string
	var wait time.Duration
	var follow bool
	cmd := &cobra.Command{
		Use:   "result REQUEST_ID [-o json] [--wait D] [--follow]",
		Short: "Print a request's terminal record and the persona's output",
		Long: `result prints the terminal record of one request — how it ended, after how many
attempts, the reason, quarantine sequence and last error when it stopped — and
the persona's output when it succeeded (read back from the outputs object store
when it was too large to keep inline). Records are kept for the outcomes
stream's retention (7 days by default).

--wait D waits up to D for a request that has not ended yet. The exit code
says how it ended, as for publish --wait: 0 succeeded, 3 blocked, 4 deferred,
5 escalated, 6 step deadline exceeded, 7 cancelled.

--follow prints the persona's live output to stdout as it is written (from
its start, as long as the output stream keeps it; notes on a retry voiding it,
or its cap, to stderr), waits for the request to end (bounded by --wait when
given), then prints the record as without it; the exit codes are the same.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("invalid flag --output: %q (want text|json)", output)
			}
			return withJetStream(cmd.Context(), g, func(_ *nats.Conn, js jetstream.JetStream) error {
				var live *livePrinter
				if follow {
					live = &livePrinter{out: g.stdout, errw: g.stderr}
				}
				return showResult(cmd.Context(), g.stdout, js, args[0], output, wait, live)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output: text|json")
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for a request still running")
	cmd.Flags().BoolVar(&follow, "follow", false, "print the persona's live output as it is written, until the request ends")
	return cmd
}

func showResult(ctx context.Context, w io.Writer, js jetstream.JetStream, requestID, output string, wait time.Duration, live *livePrinter) error {
	c, err := client.New(client.Config{JetStream: js})
	if err != nil {
		return err
	}
	if live != nil {
		if err := followResult(ctx, c, requestID, wait, live); err != nil {
			return err
		}
		wait = 0 // waited already
	}
	rec, err := c.Record(ctx, requestID)
	if errors.Is(err, wire.ErrNoOutcome) && wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		_, err = c.Await(wctx, requestID)
		if err == nil || errors.As(err, new(*client.StoppedError)) {
			rec, err = c.Record(ctx, requestID)
		}
	}
	if errors.Is(err, wire.ErrNoOutcome) {
		return fmt.Errorf("request %s has no terminal record: still running, never published, or older than the outcomes retention", requestID)
	}
	if err != nil {
		return err
	}
	var out []byte
	if rec.Outcome == schemas.OutcomeSucceeded {
		if out, err = c.Output(ctx, rec); err != nil {
			return err
		}
	}
	if output == "json" {
		err = writeRecordJSON(w, rec, out)
	} else {
		err = writeRecordText(w, rec, out)
	}
	if err != nil || rec.Outcome == schemas.OutcomeSucceeded {
		return err
	}
	stopped := &client.StoppedError{Record: rec}
	return &ExitError{Code: exitCode(stopped), Err: stopped}
}

// outcomeLabel is "quarantined (terminal)", or just "deferred" when the
// reason only repeats the outcome.
func outcomeLabel(outcome schemas.Outcome, reason schemas.Reason) string {
	if reason == "" || string(reason) == string(outcome) {
		return string(outcome)
	}
	return string(outcome) + " (" + string(reason) + ")"
}

func writeRecordText(w io.Writer, rec *schemas.OutcomeEvent, out []byte) error {
	fmt.Fprintf(w, "request %s  %s", rec.RequestID, outcomeLabel(rec.Outcome, rec.Reason))
	if rec.Blocked {
		fmt.Fprint(w, "  task blocked")
	}
	fmt.Fprintf(w, "\n  task %s  step %s  persona %s  attempts %d  agent %s\n", rec.TaskID, rec.Step, rec.Persona, rec.Attempts, dash(rec.Agent))
	fmt.Fprintf(w, "  ended %s  took %s", rec.At.UTC().Format(time.RFC3339), (time.Duration(rec.DurationMs) * time.Millisecond).String())
	if rec.Progress != nil {
		fmt.Fprintf(w, "  progress %d/%d", rec.Progress.Completed, rec.Progress.Total)
	}
	fmt.Fprintln(w)
	if u := rec.Usage; u != nil {
		fmt.Fprintf(w, "  usage %d tokens (%d in, %d out)  cost %s\n", u.InputTokens+u.OutputTokens, u.InputTokens, u.OutputTokens, costText(u))
	}
	if rec.QuarantineSeq != 0 {
		fmt.Fprintf(w, "  quarantine seq %d (personaq quarantine show %d)\n", rec.QuarantineSeq, rec.QuarantineSeq)
	}
	if rec.Detail != "" {
		fmt.Fprintf(w, "  detail %s\n", rec.Detail)
	}
	if rec.CancelledBy != "" {
		fmt.Fprintf(w, "  cancelled by %s\n", rec.CancelledBy)
	}
	if rec.LastError != "" {
		fmt.Fprintf(w, "  last error %s\n", rec.LastError)
	}
	if rec.OutputRef != nil {
		fmt.Fprintf(w, "  output %d bytes in %s/%s (%s)\n", rec.OutputRef.Size, rec.OutputRef.Bucket, rec.OutputRef.Name, rec.OutputRef.Digest)
	}
	if len(out) > 0 {
		fmt.Fprintf(w, "output\n%s\n", out)
	}
	return nil
}
