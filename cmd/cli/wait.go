package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/schemas"
)

// Exit codes of `publish --wait` and `result` by how the request ended.
const (
	exitBlocked   = 3
	exitDeferred  = 4
	exitEscalated = 5
	exitDeadline  = 6
	// exitCancelled: the request was cancelled (personaq cancel, the API,
	// a client's Cancel).
	exitCancelled = 7
)

func runPublish(cmd *cobra.Command, g *globals, f publishFlags) error {
	if f.timeout < 0 {
		return fmt.Errorf("invalid flag --timeout: %s (want a positive duration)", f.timeout)
	}
	if f.timeout > 0 && !f.wait {
		return fmt.Errorf("invalid flag --timeout: only with --wait")
	}
	if f.follow && !f.wait {
		return fmt.Errorf("invalid flag --follow: only with --wait")
	}
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("invalid flag --output: %q (want text|json)", f.output)
	}
	req, err := f.request(cmd.InOrStdin())
	if err != nil {
		return err
	}
	nc, js, err := g.connect(cmd.Context())
	if err != nil {
		return err
	}
	defer nc.Close()
	log, err := g.logger()
	if err != nil {
		return err
	}
	c, err := client.New(client.Config{JetStream: js, Logger: &log})
	if err != nil {
		return err
	}
	if f.wait {
		return publishAndWait(cmd.Context(), g, f, c, req)
	}
	var opts []client.SubmitOption
	if f.skipCheck {
		opts = append(opts, client.SkipPersonaCheck())
	}
	sub, err := c.Submit(cmd.Context(), req, opts...)
	if err != nil {
		return err
	}
	return printPublished(g.stdout, f.output, req, sub.Stream, sub.Sequence, sub.Duplicate)
}

func publishAndWait(ctx context.Context, g *globals, f publishFlags, c *client.Client, req *schemas.PersonaRequest) error {
	follow := []client.AwaitOption{client.OnAttempt(func(ev *schemas.AttemptEvent) { printAttempt(g.stderr, ev) })}
	live := &livePrinter{out: g.stdout, errw: g.stderr}
	if f.follow {
		follow = append(follow, live.option())
	}
	if f.timeout == 0 {
		res, err := c.Run(ctx, req, follow...)
		live.endLine()
		return printResult(g.stdout, f.output, res, err)
	}
	opts := []client.SubmitOption{client.WithDeadline(time.Now().Add(f.timeout))}
	if f.skipCheck {
		opts = append(opts, client.SkipPersonaCheck())
	}
	if _, err := c.Submit(ctx, req, opts...); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, f.timeout+5*time.Second)
	defer cancel()
	res, err := c.Await(wctx, req.RequestID, follow...)
	live.endLine()
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		err = fmt.Errorf("%w: request %s has no terminal record after --timeout %s", client.ErrStepDeadline, req.RequestID, f.timeout)
	}
	return printResult(g.stdout, f.output, res, err)
}

// printAttempt writes one attempt event as a line for a person watching.
func printAttempt(w io.Writer, ev *schemas.AttemptEvent) {
	switch ev.Kind {
	case schemas.AttemptStarted:
		fmt.Fprintf(w, "attempt %d/%d started%s\n", ev.Attempt, ev.MaxAttempts, onAgent(ev.Agent))
	case schemas.AttemptWaiting:
		fmt.Fprintln(w, waitingLine(ev))
	case schemas.AttemptFailed:
		line := fmt.Sprintf("attempt %d failed (%s)%s%s", ev.Attempt, ev.Class, progressSuffix(ev.Progress), usageSuffix(ev.Usage))
		if ev.NextAttempt > 0 {
			line += fmt.Sprintf(", retrying in %s%s", time.Duration(ev.NextDelayMs)*time.Millisecond, withAgent(ev.NextAgent))
		}
		fmt.Fprintf(w, "%s: %s\n", line, truncate(ev.Error, 200))
	}
}

// usageSuffix is ", 500 tokens" (", 500 tokens, $0.25" with a cost) for
// an attempt that reported usage.
func usageSuffix(u *schemas.Usage) string {
	if u == nil {
		return ""
	}
	s := fmt.Sprintf(", %d tokens", u.InputTokens+u.OutputTokens)
	if u.CostUSD != 0 {
		s += ", " + costText(u)
	}
	return s
}

func onAgent(a string) string {
	if a == "" {
		return ""
	}
	return " on " + a
}

func withAgent(a string) string {
	if a == "" {
		return ""
	}
	return " with " + a
}

func progressSuffix(p *schemas.Progress) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf(" at %d/%d", p.Completed, p.Total)
}

// printResult prints the output (text) or the record with its output
// (json) and turns how the request ended into the exit code.
func printResult(w io.Writer, output string, res *client.Result, err error) error {
	var stopped *client.StoppedError
	switch {
	case err == nil:
		if output == "json" {
			return writeRecordJSON(w, res.Record, res.Output)
		}
		_, werr := w.Write(append(res.Output, '\n'))
		return werr
	case errors.As(err, &stopped):
		if output == "json" {
			if werr := writeRecordJSON(w, stopped.Record, nil); werr != nil {
				return werr
			}
		}
		return &ExitError{Code: exitCode(err), Err: err}
	case errors.Is(err, client.ErrStepDeadline):
		return &ExitError{Code: exitDeadline, Err: err}
	}
	return err
}

func exitCode(err error) int {
	switch {
	case errors.Is(err, client.ErrDeferred):
		return exitDeferred
	case errors.Is(err, client.ErrEscalated):
		return exitEscalated
	case errors.Is(err, client.ErrStepDeadline):
		return exitDeadline
	case errors.Is(err, client.ErrCancelled):
		return exitCancelled
	}
	return exitBlocked
}

// recordJSON is a terminal record with its output read back (inline or
// from the object store).
type recordJSON struct {
	*schemas.OutcomeEvent
	Output json.RawMessage `json:"output,omitempty"`
}

func writeRecordJSON(w io.Writer, rec *schemas.OutcomeEvent, out []byte) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(recordJSON{OutcomeEvent: rec, Output: out})
}
