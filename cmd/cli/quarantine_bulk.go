package cli

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/personaq/personaq/dlq"
)

// qBulkFlags select records for replay and purge.
type qBulkFlags struct {
	qFilterFlags
	all           bool
	yes           bool
	dryRun        bool
	output        string
	progressEvery int
}

func (f *qBulkFlags) add(cmd *cobra.Command, verb string) {
	f.qFilterFlags.add(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&f.all, "all", false, "select every record the filters match (a dry run unless --yes)")
	fl.BoolVar(&f.yes, "yes", false, "act: without it a bulk "+verb+" only shows what it would do")
	fl.BoolVar(&f.dryRun, "dry-run", false, "show what would be done and do nothing")
	fl.IntVar(&f.progressEvery, "progress-every", 100, "on long runs, write a progress line to stderr every N records")
	fl.StringVarP(&f.output, "output", "o", "text", "output: text|json")
}

// selection turns arguments and flags into a selection, and says whether
// it must stay a dry run.
func (f *qBulkFlags) selection(args []string, verb string, alwaysConfirm bool) (dlq.Selection, bool, error) {
	var sel dlq.Selection
	if err := qCheckOutput(f.output); err != nil {
		return sel, false, err
	}
	if f.progressEvery < 1 {
		return sel, false, fmt.Errorf("invalid flag --progress-every: %d (want ≥ 1)", f.progressEvery)
	}
	switch {
	case len(args) > 0 && (f.all || f.set()):
		return sel, false, fmt.Errorf("give record sequences or --all with filters, not both")
	case len(args) > 0:
		seqs, err := qParseSeqs(args)
		if err != nil {
			return sel, false, err
		}
		sel.Seqs = seqs
		return sel, f.dryRun || (alwaysConfirm && !f.yes), nil
	case !f.all && f.set():
		return sel, false, fmt.Errorf("filters select records for a bulk %s: add --all", verb)
	case !f.all:
		return sel, false, fmt.Errorf("name the records: %s SEQ… or %s --all [--reason R] [--persona P] [--task T] [--since D]", verb, verb)
	}
	filter, err := f.filter(time.Now())
	if err != nil {
		return sel, false, err
	}
	sel.Filter = filter
	return sel, f.dryRun || !f.yes, nil
}

// progress writes "verb: done/total" to w every n records on runs longer than n.
func qProgress(w io.Writer, verb string, n int) func(done, total int) {
	return func(done, total int) {
		if total > n && (done%n == 0 || done == total) {
			fmt.Fprintf(w, "%s: %d/%d (%d%%)\n", verb, done, total, done*100/total)
		}
	}
}

func newQuarantineReplayCmd(g *globals) *cobra.Command {
	var (
		f            qBulkFlags
		keep         bool
		keepDeadline bool
		rate         float64
	)
	cmd := &cobra.Command{
		Use:   "replay SEQ… | replay --all [--reason R] [--persona P] [--task T] [--since D] [--yes]",
		Short: "Republish quarantined requests with a fresh attempt count, then remove their records",
		Long: `replay republishes each record's original payload to its original subject. A persona
(or compensation) request gets the request id "<original>-r<N>" so the attempt ledger
counts from one again; every other byte is kept, and headers Personaq-Replay-Of,
Personaq-Replay-Count and Personaq-Original-Request-Id carry the lineage. Replaying the
same record twice publishes once. A payload that is not a valid request goes out byte
for byte (it will be quarantined again as invalid_message; the dry run says so).

A request that carried a step deadline (Personaq-Deadline) gets a fresh step budget of
the same length, counted from the replay: the original's has most likely passed, and a
replay carrying it would end deadline_exceeded without running. --keep-deadline carries
the original deadline instead. The dry run shows the deadline each replay will carry.

Named records are replayed at once (--dry-run to preview); --all is a dry run unless
--yes. Records are removed after their replay unless --keep.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, dry, err := f.selection(args, "replay", false)
			if err != nil {
				return err
			}
			if rate < 0 {
				return fmt.Errorf("invalid flag --rate: %g (want ≥ 0; 0 = no limit)", rate)
			}
			insp, done, err := g.quarantineInspector(cmd)
			if err != nil {
				return err
			}
			defer done()
			rep, err := insp.Replay(cmd.Context(), sel, dlq.ReplayOptions{
				Keep: keep, KeepDeadline: keepDeadline, DryRun: dry, Rate: rate, Progress: qProgress(g.stderr, "replay", f.progressEvery),
			})
			if rep == nil {
				return g.quarantineErr(cmd.Context(), err)
			}
			if f.output == "json" {
				if jerr := qWriteJSON(g.stdout, rep); jerr != nil {
					return jerr
				}
			} else {
				qPrintReplay(g.stdout, rep, len(sel.Seqs) == 0, keep)
			}
			if err != nil {
				return g.quarantineErr(cmd.Context(), err)
			}
			if rep.Failed > 0 {
				return &ExitError{Code: 1, Err: fmt.Errorf("%d of %d replays failed", rep.Failed, len(rep.Items))}
			}
			return nil
		},
	}
	f.add(cmd, "replay")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the records after replaying them")
	cmd.Flags().BoolVar(&keepDeadline, "keep-deadline", false, "carry the original step deadline (default: a fresh step budget of the same length)")
	cmd.Flags().Float64Var(&rate, "rate", 0, "replay at most this many records per second (0: no limit)")
	return cmd
}

func qPrintReplay(w io.Writer, rep *dlq.ReplayReport, bulk, keep bool) {
	if len(rep.Items) == 0 {
		fmt.Fprintln(w, "no quarantined records match")
		return
	}
	as := func(it dlq.ReplayItem) string {
		if it.Verbatim {
			return "byte for byte — " + it.Note
		}
		return "as request " + it.NewRequestID
	}
	for _, it := range rep.Items {
		switch {
		case it.Err != "":
			fmt.Fprintf(w, "seq %d: FAILED: %s\n", it.Seq, it.Err)
		case it.Duplicate:
			fmt.Fprintf(w, "seq %d (%s) was replayed before as %s seq %d; nothing published\n", it.Seq, it.Reason, it.Subject, it.PublishedSeq)
		case rep.DryRun:
			fmt.Fprintf(w, "would replay seq %d (%s) to %s %s%s\n", it.Seq, it.Reason, it.Subject, as(it), qDeadline(it))
		default:
			removed := "record kept"
			if it.Removed {
				removed = "record removed"
			}
			fmt.Fprintf(w, "replayed seq %d (%s) to %s seq %d %s%s; %s\n", it.Seq, it.Reason, it.Subject, it.PublishedSeq, as(it), qDeadline(it), removed)
		}
	}
	if rep.DryRun {
		n := len(rep.Items) - rep.Failed - rep.Duplicates
		hint := "re-run without --dry-run to replay them"
		if bulk {
			hint = "re-run with --yes to replay them"
		}
		fmt.Fprintf(w, "dry run: %d of %d records would be replayed; nothing was published; %s\n", n, len(rep.Items), hint)
		return
	}
	fmt.Fprintf(w, "replayed %d of %d records (%d already replayed before, %d failed); %d removed from the quarantine\n",
		rep.Replayed, len(rep.Items), rep.Duplicates, rep.Failed, rep.Removed)
	if keep {
		fmt.Fprintln(w, "records kept (--keep): replaying them again publishes nothing")
	}
}

// qDeadline is the step deadline a replay carries, for its line: "; step
// deadline 2026-11-27T00:20:00Z (fresh step budget of 7m30s …)".
func qDeadline(it dlq.ReplayItem) string {
	switch {
	case !it.Deadline.IsZero():
		return fmt.Sprintf("; step deadline %s (%s)", it.Deadline.UTC().Format(time.RFC3339), it.DeadlineNote)
	case it.DeadlineNote != "":
		return "; " + it.DeadlineNote
	}
	return ""
}

func newQuarantinePurgeCmd(g *globals) *cobra.Command {
	var f qBulkFlags
	cmd := &cobra.Command{
		Use:   "purge SEQ… | purge --all [--reason R] [--persona P] [--task T] [--since D] --yes",
		Short: "Delete quarantined records (a dry run unless --yes)",
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, dry, err := f.selection(args, "purge", true)
			if err != nil {
				return err
			}
			insp, done, err := g.quarantineInspector(cmd)
			if err != nil {
				return err
			}
			defer done()
			rep, err := insp.Purge(cmd.Context(), sel, dlq.PurgeOptions{DryRun: dry, Progress: qProgress(g.stderr, "purge", f.progressEvery)})
			if rep == nil {
				return g.quarantineErr(cmd.Context(), err)
			}
			if f.output == "json" {
				if jerr := qWriteJSON(g.stdout, rep); jerr != nil {
					return jerr
				}
			} else {
				qPrintPurge(g.stdout, rep)
			}
			if err != nil {
				return g.quarantineErr(cmd.Context(), err)
			}
			if rep.Failed > 0 {
				return &ExitError{Code: 1, Err: errors.New(rep.Errors[0])}
			}
			return nil
		},
	}
	f.add(cmd, "purge")
	return cmd
}

func qPrintPurge(w io.Writer, rep *dlq.PurgeReport) {
	if len(rep.Entries) == 0 {
		fmt.Fprintln(w, "no quarantined records match")
		return
	}
	if rep.DryRun {
		_ = qPrintEntries(w, rep.Entries, time.Now())
		fmt.Fprintf(w, "dry run: %d records would be deleted; nothing was deleted. Re-run with --yes to delete them.\n", len(rep.Entries))
		return
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(w, "FAILED: %s\n", e)
	}
	fmt.Fprintf(w, "purged %d of %d records (%d failed)\n", rep.Purged, len(rep.Entries), rep.Failed)
}
