package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/personaq/personaq/cmd/config"
	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

func init() { register(newTaskCmd) }

func newTaskCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "task", Short: "Inspect a task's attempts in the ledger and its steps' results"}
	var step, output, configPath string
	show := &cobra.Command{
		Use:   "show TASK [--step S] [--config FILE]",
		Short: "Timeline of a task's attempts (agent, class, progress, error, delay before the next) and each step's result",
		Long: `show reads the task's attempts from the attempt ledger (Redis: --redis-url or
REDIS_URL; against a running 'personaq dev' no flag is needed, it is found
through --nats-url) and each step's terminal record and output from NATS.
With --config, the ledger is the one the file's redis section names (one
server, Redis Cluster or Sentinel, and its key prefix), as serve uses it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, prefix, source, err := taskLedgerClient(cmd.Context(), g, configPath)
			if err != nil {
				return err
			}
			defer client.Close()
			l, err := ledger.New(ledger.Config{Client: client, Prefix: prefix})
			if err != nil {
				return err
			}
			which := l.Describe() + " (" + source + ")"
			views, err := loadTask(cmd, l, args[0], step)
			if errors.Is(err, errNoLedgerEntries) {
				views, err = recordsOnly(cmd.Context(), g, args[0], step, which, err)
			}
			if err != nil {
				return err
			}
			addResults(cmd.Context(), g, views)
			return writeTask(g.stdout, output, args[0], which, views)
		},
	}
	show.Flags().StringVar(&step, "step", "", "only this step")
	show.Flags().StringVarP(&configPath, "config", "c", "", "read the ledger's Redis (url, Cluster addrs or sentinel) and prefix from this configuration file")
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
	// Record is the step's terminal record, when it has one; Output the
	// persona's output (truncated to taskOutputMax in text form).
	Record      *schemas.OutcomeEvent `json:"record,omitempty"`
	Output      json.RawMessage       `json:"output,omitempty"`
	RecordError string                `json:"record_error,omitempty"`
	// Usage sums the attempts' usage the ledger kept; absent when none
	// reported any.
	Usage *schemas.Usage `json:"usage,omitempty"`
}

type attemptView struct {
	Attempt     int    `json:"attempt"`
	Agent       string `json:"agent,omitempty"`
	Role        string `json:"role,omitempty"`
	Class       string `json:"class"`
	Progress    string `json:"progress,omitempty"`
	Error       string `json:"error,omitempty"`
	Output      string `json:"output,omitempty"`
	DurationMs  int64  `json:"duration_ms"`
	At          string `json:"at"`
	NextDelayMs *int64 `json:"next_delay_ms,omitempty"`
	// Usage is what the attempt reported consuming (tokens, cost).
	Usage *schemas.Usage `json:"usage,omitempty"`
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
		out = append(out, stepView{Step: step, RequestID: reqID, State: st.String(), Attempts: attemptViews(hist),
			Usage: usageView(retry.TotalUsage(hist))})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w for task %q", errNoLedgerEntries, task)
	}
	return out, nil
}

func attemptViews(hist []retry.Attempt) []attemptView {
	out := make([]attemptView, len(hist))
	for i, a := range hist {
		v := attemptView{Attempt: a.Number, Agent: a.Agent, Role: string(a.Role), Class: a.Class.String(),
			Error: a.Error, Output: a.Output, DurationMs: a.Duration.Milliseconds(), At: a.At.UTC().Format(time.RFC3339Nano)}
		if a.Progress.Known() {
			v.Progress = fmt.Sprintf("%d/%d", a.Progress.Completed, a.Progress.Total)
		}
		if i+1 < len(hist) {
			d := max(hist[i+1].At.Sub(a.At.Add(a.Duration)).Milliseconds(), 0)
			v.NextDelayMs = &d
		}
		v.Usage = usageView(a.Usage)
		out[i] = v
	}
	return out
}

func writeTask(w io.Writer, output, task, ledgerName string, views []stepView) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"task_id": task, "ledger": ledgerName, "steps": views})
	case "text":
		fmt.Fprintf(w, "ledger: %s\n", ledgerName)
		for _, v := range views {
			fmt.Fprintf(w, "task %s step %s request %s: %s\n", task, v.Step, v.RequestID, v.State)
			if len(v.Attempts) > 0 {
				writeAttempts(w, v)
			}
			writeStepResult(w, v)
		}
		return nil
	}
	return fmt.Errorf("invalid flag --output: %q (want text|json)", output)
}

// writeAttempts prints a step's attempt table; the TOKENS and COST columns
// appear when an attempt of the step reported usage, with the step's total
// below the table.
func writeAttempts(w io.Writer, v stepView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	usage, pad := "", ""
	if v.Usage != nil {
		usage, pad = "TOKENS IN/OUT\tCOST\t", "\t\t"
	}
	fmt.Fprintln(tw, "  ATTEMPT\tAGENT\tCLASS\tPROGRESS\tDURATION\tNEXT IN\t"+usage+"ERROR")
	for _, a := range v.Attempts {
		next := "-"
		if a.NextDelayMs != nil {
			next = (time.Duration(*a.NextDelayMs) * time.Millisecond).String()
		}
		cols := ""
		if v.Usage != nil {
			cols = tokensText(a.Usage) + "\t" + costText(a.Usage) + "\t"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s%s\n", a.Attempt, dash(a.Agent), a.Class, dash(a.Progress),
			time.Duration(a.DurationMs)*time.Millisecond, next, cols, truncate(a.Error, 80))
		if a.Output != "" {
			fmt.Fprintf(tw, "  \t\t\t\t\t\t%sanswered: %s\n", pad, truncate(oneLine(a.Output), 80))
		}
	}
	tw.Flush()
	if u := v.Usage; u != nil {
		fmt.Fprintf(w, "  usage: %d input + %d output = %d tokens, cost %s over %d attempt(s)\n",
			u.InputTokens, u.OutputTokens, u.InputTokens+u.OutputTokens, costText(u), len(v.Attempts))
	}
}

func usageView(u retry.Usage) *schemas.Usage {
	if u.IsZero() {
		return nil
	}
	return &schemas.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD}
}

func tokensText(u *schemas.Usage) string {
	if u == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%d", u.InputTokens, u.OutputTokens)
}

// costText is a reported cost in dollars, "-" when none was reported.
func costText(u *schemas.Usage) string {
	if u == nil || u.CostUSD == 0 {
		return "-"
	}
	return "$" + strconv.FormatFloat(math.Round(u.CostUSD*1e6)/1e6, 'f', -1, 64) // no float noise from sums
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// ledgerURL is --redis-url, or the in-process ledger of a running
// `personaq dev` on --nats-url.
// taskLedgerClient connects to the ledger `task show` reads: the config
// file's redis section when one is given, else --redis-url or dev's.
// source says where the ledger was found, for the line that names it.
func taskLedgerClient(ctx context.Context, g *globals, configPath string) (client redis.UniversalClient, prefix, source string, err error) {
	if configPath != "" {
		cfg, err := config.Load(configPath, os.LookupEnv)
		if err != nil {
			return nil, "", "", err
		}
		opts, err := cfg.RedisOptions()
		if err != nil {
			return nil, "", "", err
		}
		if opts == nil {
			return nil, "", "", fmt.Errorf("%s configures no Redis (redis.url, redis.addrs or redis.sentinel): there is no ledger to read", configPath)
		}
		return ledger.NewClient(opts), cfg.Redis.Prefix, "from " + configPath, nil
	}
	source = "from --redis-url / REDIS_URL"
	if g.redisURL == "" {
		source = "the in-process ledger of the personaq dev at " + redactURL(g.natsURL)
	}
	url, err := ledgerURL(ctx, g)
	if err != nil {
		return nil, "", "", err
	}
	client, err = ledger.NewClientURL(url)
	if err != nil {
		return nil, "", "", fmt.Errorf("invalid flag --redis-url: %w", err)
	}
	return client, "", source, nil
}

func ledgerURL(ctx context.Context, g *globals) (string, error) {
	if g.redisURL != "" {
		return g.redisURL, nil
	}
	url, err := devLedgerURL(ctx, g)
	if err != nil || url == "" {
		return "", fmt.Errorf("task show reads the attempt ledger: set --redis-url or REDIS_URL (a running personaq dev is found through --nats-url, but none answered at %s)", redactURL(g.natsURL))
	}
	return url, nil
}

// taskOutputMax bounds the output `task show` prints per step.
const taskOutputMax = 400

// addResults reads each step's terminal record and output from NATS; a
// step without one is still running, or its record expired.
func addResults(ctx context.Context, g *globals, views []stepView) {
	nc, js, err := g.connect(ctx)
	if err != nil {
		for i := range views {
			views[i].RecordError = err.Error()
		}
		return
	}
	defer nc.Close()
	c, err := client.New(client.Config{JetStream: js})
	if err != nil {
		return
	}
	for i := range views {
		v := &views[i]
		rec, err := c.Record(ctx, v.RequestID)
		if err != nil {
			v.RecordError = err.Error()
			continue
		}
		v.Record = rec
		if out, err := c.Output(ctx, rec); err == nil && len(out) > 0 {
			v.Output = out
		}
	}
}

func writeStepResult(w io.Writer, v stepView) {
	rec := v.Record
	if rec == nil {
		fmt.Fprintf(w, "  result: none yet (%s)\n", v.RecordError)
		return
	}
	fmt.Fprintf(w, "  result: %s", rec.Outcome)
	if rec.Reason != "" {
		fmt.Fprintf(w, " (%s)", rec.Reason)
	}
	if rec.QuarantineSeq != 0 {
		fmt.Fprintf(w, ", quarantine seq %d", rec.QuarantineSeq)
	}
	fmt.Fprintf(w, " after %d attempt(s)", rec.Attempts)
	if u := rec.Usage; u != nil {
		fmt.Fprintf(w, ", %d tokens (%d in, %d out), cost %s", u.InputTokens+u.OutputTokens, u.InputTokens, u.OutputTokens, costText(u))
	}
	fmt.Fprintln(w)
	if len(v.Output) > 0 {
		fmt.Fprintf(w, "  output (%d bytes): %s\n", len(v.Output), truncate(oneLine(string(v.Output)), taskOutputMax))
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
