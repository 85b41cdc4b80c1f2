package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/schemas"
)

func init() { register(newPublishCmd) }

type publishFlags struct {
	persona, task, step, input, policy, id, primary, fallback, correlation, output string
	progressTotal                                                                  int
}

func newPublishCmd(g *globals) *cobra.Command {
	var f publishFlags
	cmd := &cobra.Command{
		Use:   "publish --persona P --task T [--step S] [--input JSON|@file|-]",
		Short: "Publish a persona request (deduplicated by request id)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := f.request(cmd.InOrStdin())
			if err != nil {
				return err
			}
			nc, js, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer nc.Close()
			ack, err := consumers.PublishRequest(cmd.Context(), js, consumers.Topology{}, req)
			if err != nil {
				return err
			}
			return printPublished(g.stdout, f.output, req, ack.Stream, ack.Sequence, ack.Duplicate)
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
		return nil, fmt.Errorf("invalid flag --input: %w", err)
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("invalid flag --input: not valid JSON")
	}
	return json.RawMessage(data), nil
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
