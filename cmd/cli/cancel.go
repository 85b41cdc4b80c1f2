package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/schemas"
)

// Exit codes of `personaq cancel` besides 0 (cancelled).
const (
	// exitAlreadyEnded: the request (every open request of the task)
	// had already ended another way; its record stands.
	exitAlreadyEnded = 8
	// exitNothingToCancel: no request has that id (or the task has no
	// open request).
	exitNothingToCancel = 9
)

func init() { register(newCancelCmd) }

type cancelFlags struct {
	task, reason, output string
}

func newCancelCmd(g *globals) *cobra.Command {
	var f cancelFlags
	cmd := &cobra.Command{
		Use:   "cancel REQUEST_ID | --task TASK_ID [--reason TEXT]",
		Short: "Cancel a request, or every open request of a task",
		Long: `cancel stops a request for good: queued, it never runs; waiting for a retry, it
runs no further attempt; running, its attempt is stopped (an HTTP persona's
request is aborted, a command persona's whole process group gets SIGTERM, then
SIGKILL after its kill_grace). It ends with the terminal outcome "cancelled",
written create-once like every other ending: a request that ended another way
first keeps that record, which is printed. --task cancels every open request of
the task, whatever its persona or step. The reason and "cli" as who asked are
kept in the record.

Exit codes:

  0   cancelled (with --task: at least one request)
  8   it had already ended another way (with --task: every open request did)
  9   no request has that id (with --task: the task has no open request)
  1   anything else (NATS unreachable, bad flags, …)`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 1) == (f.task != "") {
				return fmt.Errorf("invalid arguments: give a REQUEST_ID or --task, not both")
			}
			if f.output != "text" && f.output != "json" {
				return fmt.Errorf("invalid flag --output: %q (want text|json)", f.output)
			}
			return withJetStream(cmd.Context(), g, func(_ *nats.Conn, js jetstream.JetStream) error {
				c, err := client.New(client.Config{JetStream: js})
				if err != nil {
					return err
				}
				if f.task != "" {
					return cancelTask(cmd.Context(), g.stdout, c, f)
				}
				return cancelRequest(cmd.Context(), g.stdout, c, args[0], f)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.task, "task", "", "cancel every open request of this task")
	fl.StringVar(&f.reason, "reason", "", "why (kept in the cancelled record)")
	fl.StringVarP(&f.output, "output", "o", "text", "output: text|json")
	return cmd
}

func cancelRequest(ctx context.Context, w io.Writer, c *client.Client, id string, f cancelFlags) error {
	rec, err := c.Cancel(ctx, id, f.reason, client.CancelledBy("cli"))
	switch {
	case errors.Is(err, client.ErrUnknownRequest):
		return &ExitError{Code: exitNothingToCancel, Err: err}
	case errors.Is(err, client.ErrAlreadyEnded):
		if werr := printCancelled(w, f.output, nil, []*schemas.OutcomeEvent{rec}); werr != nil {
			return werr
		}
		return &ExitError{Code: exitAlreadyEnded, Err: err}
	case err != nil:
		return err
	}
	return printCancelled(w, f.output, []*schemas.OutcomeEvent{rec}, nil)
}

func cancelTask(ctx context.Context, w io.Writer, c *client.Client, f cancelFlags) error {
	res, err := c.CancelTask(ctx, f.task, f.reason, client.CancelledBy("cli"))
	if res != nil {
		if werr := printCancelled(w, f.output, res.Cancelled, res.AlreadyEnded); werr != nil {
			return werr
		}
	}
	switch {
	case err != nil:
		return err
	case len(res.Cancelled) > 0:
		return nil
	case len(res.AlreadyEnded) > 0:
		return &ExitError{Code: exitAlreadyEnded, Err: fmt.Errorf("task %s: every open request had already ended", f.task)}
	}
	return &ExitError{Code: exitNothingToCancel, Err: fmt.Errorf("task %s has no open request", f.task)}
}

// printCancelled prints one line per record (text) or the records (json):
// those this call cancelled, then those that had already ended.
func printCancelled(w io.Writer, output string, cancelled, ended []*schemas.OutcomeEvent) error {
	if output == "json" {
		for _, rec := range append(slices.Clip(cancelled), ended...) {
			if err := writeRecordJSON(w, rec, nil); err != nil {
				return err
			}
		}
		return nil
	}
	for i, rec := range append(slices.Clip(cancelled), ended...) {
		verb := "cancelled"
		if i >= len(cancelled) {
			verb = "already ended: " + string(rec.Outcome)
		}
		if _, err := fmt.Fprintf(w, "request %s  %s  (task %s  step %s  persona %s)\n", rec.RequestID, verb, rec.TaskID, rec.Step, rec.Persona); err != nil {
			return err
		}
	}
	return nil
}
