package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/schemas"
)

func init() { register(newQuarantineCmd) }

func newQuarantineCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "quarantine",
		Aliases: []string{"q"},
		Short:   "Inspect, replay and purge quarantined work",
		Long: `The quarantine stream keeps every request that had to stop — exhausted, terminal,
invalid_message, deferred, escalated, compensation_failed, max_deliveries — with its
original subject, headers and payload, the reason and the whole error history.

  personaq quarantine ls [--reason R] [--persona P] [--task T] [--since 1h]
  personaq quarantine stats
  personaq quarantine show SEQ
  personaq quarantine replay SEQ…            (acts at once; --dry-run to preview)
  personaq quarantine replay --all [filters] (a dry run unless --yes)
  personaq quarantine purge  SEQ… | --all [filters]  (a dry run unless --yes)

--stream reads another stream of quarantine records, such as a hub's
PERSONAQ_QUARANTINE_ALL that sources every region's (deployments/nats/regions).`,
	}
	cmd.PersistentFlags().String("stream", wire.Topology{}.WithDefaults().QuarantineStream, "the quarantine stream to read")
	cmd.AddCommand(newQuarantineLsCmd(g), newQuarantineStatsCmd(g), newQuarantineShowCmd(g),
		newQuarantineReplayCmd(g), newQuarantinePurgeCmd(g))
	return cmd
}

// qFilterFlags are the record filters ls, replay and purge share.
type qFilterFlags struct {
	reasons  []string
	personas []string
	tasks    []string
	since    string
}

func (f *qFilterFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVar(&f.reasons, "reason", nil, "keep records with this reason (repeatable, comma separated): "+qReasonNames())
	fl.StringSliceVar(&f.personas, "persona", nil, "keep these personas' records (repeatable, comma separated)")
	fl.StringSliceVar(&f.tasks, "task", nil, "keep these tasks' records (repeatable, comma separated)")
	fl.StringVar(&f.since, "since", "", "keep records stored since a duration ago (1h, 30m) or an RFC 3339 time")
}

func (f *qFilterFlags) set() bool {
	return len(f.reasons) > 0 || len(f.personas) > 0 || len(f.tasks) > 0 || f.since != ""
}

func (f *qFilterFlags) filter(now time.Time) (dlq.Filter, error) {
	var out dlq.Filter
	for _, r := range f.reasons {
		r = strings.TrimSpace(r)
		if !slices.Contains(schemas.Reasons, schemas.Reason(r)) {
			return out, fmt.Errorf("invalid flag --reason: %q (want one of %s)", r, qReasonNames())
		}
		out.Reasons = append(out.Reasons, schemas.Reason(r))
	}
	out.Personas, out.Tasks = trimAll(f.personas), trimAll(f.tasks)
	if f.since != "" {
		since, err := qParseSince(f.since, now)
		if err != nil {
			return out, err
		}
		out.Since = since
	}
	return out, out.Validate()
}

// trimAll trims the values of a list flag and drops empty ones.
func trimAll(vs []string) []string {
	var out []string
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func qParseSince(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("invalid flag --since: %q is negative", v)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("invalid flag --since: %q (want a duration like 1h or an RFC 3339 time)", v)
}

func qReasonNames() string {
	names := make([]string, len(schemas.Reasons))
	for i, r := range schemas.Reasons {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// quarantineInspector connects for cmd (see connectCmd) and returns an
// Inspector on the default topology, or on the stream --stream names.
func (g *globals) quarantineInspector(cmd *cobra.Command) (*dlq.Inspector, func(), error) {
	nc, js, err := g.connectCmd(cmd)
	if err != nil {
		return nil, nil, err
	}
	topo := wire.Topology{}.WithDefaults()
	if f := cmd.Flag("stream"); f != nil && f.Value.String() != "" {
		topo.QuarantineStream = f.Value.String()
	}
	insp, err := dlq.NewInspector(dlq.InspectorConfig{JetStream: js, Stream: topo.QuarantineStream, Prefix: topo.QuarantinePrefix})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return insp, nc.Close, nil
}

// quarantineErr adds what an operator needs to a missing stream, and
// names the permission the server refused (see connectCmd).
func (g *globals) quarantineErr(ctx context.Context, err error) error {
	err = permissionCause(ctx, err)
	if errors.Is(err, dlq.ErrStreamMissing) {
		return fmt.Errorf("%w (on %s): nothing was ever quarantined there, or personaq never ran against this server", err, redactURL(g.natsURL))
	}
	return err
}

func qParseSeqs(args []string) ([]uint64, error) {
	out := make([]uint64, 0, len(args))
	for _, a := range args {
		seq, err := strconv.ParseUint(a, 10, 64)
		if err != nil || seq == 0 {
			return nil, fmt.Errorf("invalid sequence %q: want a record's positive stream sequence (see quarantine ls)", a)
		}
		out = append(out, seq)
	}
	return out, nil
}

func qCheckOutput(o string) error {
	if o != "text" && o != "json" {
		return fmt.Errorf("invalid flag --output: %q (want text|json)", o)
	}
	return nil
}

func qWriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newQuarantineLsCmd(g *globals) *cobra.Command {
	var (
		f      qFilterFlags
		limit  int
		output string
	)
	cmd := &cobra.Command{
		Use:   "ls [--reason R] [--persona P] [--task T] [--since D] [--limit N]",
		Short: "List quarantined records, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := qCheckOutput(output); err != nil {
				return err
			}
			if limit < 0 {
				return fmt.Errorf("invalid flag --limit: %d (want ≥ 0; 0 lists all)", limit)
			}
			now := time.Now()
			filter, err := f.filter(now)
			if err != nil {
				return err
			}
			insp, done, err := g.quarantineInspector(cmd)
			if err != nil {
				return err
			}
			defer done()
			filter.Limit = limit
			entries, err := insp.List(cmd.Context(), filter)
			if err != nil {
				return g.quarantineErr(cmd.Context(), err)
			}
			if output == "json" {
				return qWriteJSON(g.stdout, entries)
			}
			if err := qPrintEntries(g.stdout, entries, now); err != nil {
				return err
			}
			if limit > 0 && len(entries) == limit {
				if total, err := insp.Count(cmd.Context(), filter); err == nil && total > limit {
					fmt.Fprintf(g.stderr, "showing the newest %d of %d matching records; --limit 0 lists all\n", limit, total)
				}
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().IntVar(&limit, "limit", 50, "list at most this many records (the newest); 0 lists all")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output: text|json")
	return cmd
}

func qPrintEntries(w io.Writer, entries []dlq.Entry, now time.Time) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "no quarantined records match")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tAGE\tREASON\tPERSONA\tTASK\tATTEMPTS\tLAST ERROR")
	for _, e := range entries {
		age := qAge(now.Sub(e.StoredAt))
		if e.Record == nil {
			fmt.Fprintf(tw, "%d\t%s\t%s\t-\t-\t-\t%s\n", e.Seq, age, qDash(string(e.Reason())), qOneLine("undecodable record: "+e.Err, 70))
			continue
		}
		r := e.Record
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, age, r.Reason, qDash(r.Persona), qDash(qFirst(r.TaskID, r.SagaID)),
			qAttempts(r), qOneLine(qLastError(r), 70))
	}
	return tw.Flush()
}

// qAttempts shows handler attempts, or deliveries for a crash loop
// whose attempts were never recorded.
func qAttempts(r *schemas.QuarantineRecord) string {
	if r.Attempts == 0 && r.Deliveries > 0 {
		return fmt.Sprintf("%d deliv.", r.Deliveries)
	}
	return strconv.Itoa(r.Attempts)
}

func qLastError(r *schemas.QuarantineRecord) string {
	if n := len(r.Errors); n > 0 && r.Errors[n-1].Error != "" {
		return r.Errors[n-1].Error
	}
	return r.Detail
}

// qOneLine flattens s and cuts it to max runes.
func qOneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

func qDash(s string) string {
	if s == "" || s == "_" {
		return "-"
	}
	return s
}

func qFirst(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// qAge renders a duration as 45s, 12m, 3h, 2d.
func qAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func newQuarantineStatsCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Count quarantined records by reason and persona",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := qCheckOutput(output); err != nil {
				return err
			}
			insp, done, err := g.quarantineInspector(cmd)
			if err != nil {
				return err
			}
			defer done()
			st, err := insp.Stats(cmd.Context())
			if err != nil {
				return g.quarantineErr(cmd.Context(), err)
			}
			if output == "json" {
				return qWriteJSON(g.stdout, st)
			}
			return qPrintStats(g.stdout, st)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output: text|json")
	return cmd
}

func qPrintStats(w io.Writer, st *dlq.Stats) error {
	if st.Total == 0 {
		fmt.Fprintf(w, "quarantine %s is empty\n", st.Stream)
		return qPrintCaptureFailures(w, st.CaptureFailing)
	}
	size := qBytes(st.Bytes)
	if st.PayloadBytes > 0 {
		size += fmt.Sprintf(" (+ %s of payloads kept out of line)", qBytes(st.PayloadBytes))
	}
	fmt.Fprintf(w, "quarantine %s: %d records, %s, oldest %s old (seq %d, stored %s)\n",
		st.Stream, st.Total, size, qAge(st.OldestAge), st.FirstSeq, st.Oldest.Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nBY REASON\tRECORDS")
	for _, k := range qSortedKeys(st.ByReason) {
		fmt.Fprintf(tw, "%s\t%d\n", k, st.ByReason[k])
	}
	fmt.Fprintln(tw, "\nBY PERSONA\tRECORDS")
	for _, k := range qSortedKeys(st.ByPersona) {
		fmt.Fprintf(tw, "%s\t%d\n", qDash(k), st.ByPersona[k])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return qPrintCaptureFailures(w, st.CaptureFailing)
}

// qPrintCaptureFailures lists the crash-looping messages that could not be
// quarantined yet.
func qPrintCaptureFailures(w io.Writer, fs []dlq.CaptureFailure) error {
	if len(fs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nNOT CAPTURED: %d crash-looping messages wait in their stream; the max-deliveries listener keeps retrying them (see its error log)\n", len(fs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tSEQ\tFAILURES\tLAST TRY\tLAST ERROR")
	for _, f := range fs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", f.Stream, f.Seq, f.Failures, f.At.Format(time.RFC3339), qOneLine(f.Error, 70))
	}
	return tw.Flush()
}

// qSortedKeys orders by count, largest first, then by name.
func qSortedKeys(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return keys
}

func qBytes(n uint64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
