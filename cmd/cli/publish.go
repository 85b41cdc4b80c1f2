package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/schemas"
)

func init() { register(newPublishCmd) }

type publishFlags struct {
	persona, task, step, input, policy, id, primary, fallback, correlation, output string
	progressTotal                                                                  int
	wait, skipCheck, follow                                                        bool
	timeout                                                                        time.Duration
	maxTokens                                                                      int64
	maxCostUSD                                                                     float64
}

func newPublishCmd(g *globals) *cobra.Command {
	var f publishFlags
	cmd := &cobra.Command{
		Use:   "publish --persona P --task T [--step S] [--input JSON|@file|-] [--wait [--timeout D]]",
		Short: "Publish a persona request (deduplicated by request id); with --wait, await its result",
		Long: `publish stores one persona request on the requests stream. It refuses a persona
that no replica serves (naming those that are) and a policy name that does not
resolve; --skip-persona-check publishes anyway.

With --wait it then waits for the request's terminal record, the way a workflow
engine's persona-request step does: the step budget is computed from the
persona's retry policy — (max retries + 1) × attempt timeout + the backoffs +
30s — and sent with the request as its step deadline (--timeout overrides it).
Attempt events go to stderr as they happen ("attempt 1 failed (timeout),
retrying in 30s with agent-b"); the persona's output goes to stdout (-o json:
the whole terminal record with the output). Exit codes with --wait:

  0   succeeded
  3   blocked: retries exhausted, a terminal failure, an invalid message or
      the token/cost budget exhausted (quarantined; see personaq quarantine
      show SEQ)
  4   deferred: adaptive retry found a plateau across agents
  5   escalated: retries exhausted without progress
  6   step deadline exceeded
  7   cancelled (personaq cancel, the API, a client's Cancel)
  1   anything else (NATS unreachable, bad flags, the --id already used for a
      request with other content: a conflict, never the first one's output, …) (NATS unreachable, bad flags, …)

With --wait --follow, the persona's live output goes to stdout as it is
written (notes on a retry voiding it, or its cap, to stderr), then the output
as without --follow; the exit codes are the same.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return explainConflict(runPublish(cmd, g, f))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.persona, "persona", "", "persona to run (required)")
	fl.StringVar(&f.task, "task", "", "task id (required)")
	fl.StringVar(&f.step, "step", "main", "step within the task")
	fl.StringVar(&f.input, "input", "", "input payload: JSON text, @file, or - for stdin")
	fl.StringVar(&f.policy, "policy", "", "policy preset name (default: the persona's policy)")
	fl.StringVar(&f.id, "id", "", "request id (default: random); republishing the same id is deduplicated")
	fl.StringVar(&f.primary, "agent", "", "primary agent (odd attempts)")
	fl.StringVar(&f.fallback, "fallback-agent", "", "fallback agent (even attempts)")
	fl.StringVar(&f.correlation, "correlation-id", "", "correlation id (default: the request id)")
	fl.IntVar(&f.progressTotal, "progress-total", 0, "number of sub-tasks the persona reports progress against")
	fl.StringVarP(&f.output, "output", "o", "text", "output: text|json")
	fl.BoolVar(&f.wait, "wait", false, "wait for the result: output on stdout, attempt events on stderr, exit code by outcome")
	fl.BoolVar(&f.follow, "follow", false, "with --wait: print the persona's live output to stdout as it is written")
	fl.DurationVar(&f.timeout, "timeout", 0, "with --wait: step deadline from now (default: the step budget of the persona's policy)")
	fl.BoolVar(&f.skipCheck, "skip-persona-check", false, "publish even if no replica serves the persona")
	fl.Int64Var(&f.maxTokens, "max-tokens", 0, "token budget of all attempts together (tightens the policy's; 0: none)")
	fl.Float64Var(&f.maxCostUSD, "max-cost-usd", 0, "cost budget in US dollars of all attempts together (tightens the policy's; 0: none)")
	_ = cmd.MarkFlagRequired("persona")
	_ = cmd.MarkFlagRequired("task")
	return cmd
}

func (f publishFlags) request(stdin io.Reader) (*schemas.PersonaRequest, error) {
	req := schemas.NewRequest(f.task, f.step, f.persona)
	if f.id != "" {
		req.RequestID = f.id
	}
	req.Policy, req.CorrelationID, req.ProgressTotal = f.policy, f.correlation, f.progressTotal
	if f.primary != "" || f.fallback != "" {
		req.Agents = schemas.Agents{Primary: f.primary, Fallback: f.fallback}
	}
	if f.maxTokens != 0 || f.maxCostUSD != 0 {
		req.Budget = &schemas.Budget{MaxTokens: f.maxTokens, MaxCostUSD: f.maxCostUSD}
	}
	input, err := readInput(f.input, stdin)
	if err != nil {
		return nil, err
	}
	req.Input = input
	if _, err := schemas.Encode(req); err != nil {
		return nil, fmt.Errorf("invalid request: %w", err)
	}
	return req, nil
}

// readInput reads --input: JSON text, @file or - (stdin); it must be JSON.
func readInput(v string, stdin io.Reader) (json.RawMessage, error) {
	data, err := readArg("--input", v, stdin)
	if err != nil || data == nil {
		return nil, err
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("invalid flag --input: not valid JSON %s", jsonProblem(data))
	}
	return json.RawMessage(data), nil
}

// readArg reads a flag's value that is text, @file or - (stdin), bounded
// by the largest message personaq accepts; nil when v is empty.
func readArg(flag, v string, stdin io.Reader) ([]byte, error) {
	var data []byte
	var err error
	switch {
	case v == "":
		return nil, nil
	case v == "-":
		data, err = io.ReadAll(io.LimitReader(stdin, schemas.MaxPayloadBytes+1))
	case strings.HasPrefix(v, "@"):
		data, err = os.ReadFile(v[1:])
	default:
		data = []byte(v)
	}
	if err != nil {
		return nil, fmt.Errorf("invalid flag %s: %w", flag, err)
	}
	if len(data) > schemas.MaxPayloadBytes {
		return nil, fmt.Errorf("invalid flag %s: over %d bytes (%w)", flag, schemas.MaxPayloadBytes, schemas.ErrTooLarge)
	}
	return data, nil
}

func printPublished(w io.Writer, output string, req *schemas.PersonaRequest, stream string, seq uint64, dup bool) error {
	if output == "json" {
		return json.NewEncoder(w).Encode(map[string]any{
			"request_id": req.RequestID, "stream": stream, "sequence": seq, "duplicate": dup,
		})
	}
	note := ""
	if dup {
		note = " (duplicate: already stored, not published again)"
	}
	_, err := fmt.Fprintf(w, "published request %s for persona %s task %s step %s: stream %s seq %d%s\n",
		req.RequestID, req.Persona, req.TaskID, req.Step, stream, seq, note)
	return err
}

// explainConflict says what a refused --id is: the request id was already
// submitted with other content (a conflict; republishing the same content
// is idempotent instead), naming what is stored.
func explainConflict(err error) error {
	var ce *client.ConflictError
	if !errors.As(err, &ce) {
		return err
	}
	what := ""
	switch {
	case ce.Queued != nil:
		what = fmt.Sprintf(" for persona %s task %s step %s", ce.Queued.Persona, ce.Queued.TaskID, ce.Queued.Step)
	case ce.Record != nil:
		what = fmt.Sprintf(" for persona %s task %s step %s (ended %s)", ce.Record.Persona, ce.Record.TaskID, ce.Record.Step, ce.Record.Outcome)
	case ce.Stored != nil:
		what = fmt.Sprintf(" for persona %s task %s step %s", ce.Stored.Persona, ce.Stored.TaskID, ce.Stored.Step)
	}
	return fmt.Errorf("request id %s was already submitted%s with other content (conflict: stored digest %s, this one %s); "+
		"publish the same content to get that request, or choose another --id: %w", ce.RequestID, what, ce.StoredDigest, ce.Digest, err)
}
