package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/retry"
)

func init() { register(newTaskCmd) }

func newTaskCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "task", Short: "Inspect a task's attempts in the ledger"}
	var step, output string
	show := &cobra.Command{
		Use:   "show TASK [--step S]",
		Short: "Timeline of a task's attempts: agent, class, progress, error, delay before the next",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if g.redisURL == "" {
				return fmt.Errorf("task show reads the ledger: set --redis-url or REDIS_URL")
			}
			opts, err := redis.ParseURL(g.redisURL)
			if err != nil {
				return fmt.Errorf("invalid flag --redis-url: %w", err)
			}
			client := redis.NewClient(opts)
			defer client.Close()
			l, err := ledger.New(ledger.Config{Client: client})
			if err != nil {
				return err
			}
			views, err := loadTask(cmd, l, args[0], step)
			if err != nil {
				return err
			}
			return writeTask(g.stdout, output, args[0], views)
		},
	}
	show.Flags().StringVar(&step, "step", "", "only this step")
	show.Flags().StringVarP(&output, "output", "o", "text", "output: text|json")
	cmd.AddCommand(show)
	return cmd
}

// stepView is one request of one step, as `task show` prints it.
type stepView struct {
	Step      string        `json:"step"`
	RequestID string        `json:"request_id"`
	State     string        `json:"state"`
	Attempts  []attemptView `json:"attempts"`
}

type attemptView struct {
	Attempt     int    `json:"attempt"`
	Agent       string `json:"agent,omitempty"`
	Role        string `json:"role,omitempty"`
	Class       string `json:"class"`
	Progress    string `json:"progress,omitempty"`
	Error       string `json:"error,omitempty"`
	DurationMs  int64  `json:"duration_ms"`
	At          string `json:"at"`
	NextDelayMs *int64 `json:"next_delay_ms,omitempty"`
}

func loadTask(cmd *cobra.Command, l *ledger.Ledger, task, only string) ([]stepView, error) {
	keys, err := l.Steps(cmd.Context(), task)
	if err != nil {
		return nil, err
	}
	var out []stepView
	for _, k := range keys {
		step, reqID, _ := strings.Cut(k.Step, "@")
		if only != "" && step != only {
			continue
		}
		hist, st, err := l.History(cmd.Context(), k)
		if err != nil {
			return nil, err
		}
		out = append(out, stepView{Step: step, RequestID: reqID, State: stateText(st), Attempts: attemptViews(hist)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no ledger entries for task %q (expired after the TTL, or never run)", task)
	}
	return out, nil
}

func stateText(st ledger.State) string {
	switch {
	case st.Done:
		return "succeeded"
	case st.InFlight > 0:
		return fmt.Sprintf("running attempt %d", st.Attempts+1)
	}
	return fmt.Sprintf("%d attempt(s) recorded, not succeeded", st.Attempts)
}

func attemptViews(hist []retry.Attempt) []attemptView {
	out := make([]attemptView, len(hist))
	for i, a := range hist {
		v := attemptView{Attempt: a.Number, Agent: a.Agent, Role: string(a.Role), Class: a.Class.String(),
			Error: a.Error, DurationMs: a.Duration.Milliseconds(), At: a.At.UTC().Format(time.RFC3339Nano)}
		if a.Progress.Known() {
			v.Progress = fmt.Sprintf("%d/%d", a.Progress.Completed, a.Progress.Total)
		}
		if i+1 < len(hist) {
			d := hist[i+1].At.Sub(a.At.Add(a.Duration)).Milliseconds()
			v.NextDelayMs = &d
		}
		out[i] = v
	}
	return out
}

func writeTask(w io.Writer, output, task string, views []stepView) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"task_id": task, "steps": views})
	case "text":
		for _, v := range views {
			fmt.Fprintf(w, "task %s step %s request %s: %s\n", task, v.Step, v.RequestID, v.State)
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  ATTEMPT\tAGENT\tCLASS\tPROGRESS\tDURATION\tNEXT IN\tERROR")
			for _, a := range v.Attempts {
				next := "-"
				if a.NextDelayMs != nil {
					next = (time.Duration(*a.NextDelayMs) * time.Millisecond).String()
				}
				fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, dash(a.Agent), a.Class, dash(a.Progress),
					time.Duration(a.DurationMs)*time.Millisecond, next, truncate(a.Error, 80))
			}
			tw.Flush()
		}
		return nil
	}
	return fmt.Errorf("invalid flag --output: %q (want text|json)", output)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
