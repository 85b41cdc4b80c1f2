package cli

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/schemas"
)

func newQuarantineShowCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "show SEQ",
		Short: "Show one record: provenance, payload (pretty-printed) and the error history as a timeline",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := qCheckOutput(output); err != nil {
				return err
			}
			seqs, err := qParseSeqs(args)
			if err != nil {
				return err
			}
			insp, done, err := g.quarantineInspector(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			e, err := insp.Get(cmd.Context(), seqs[0])
			if err != nil {
				return g.quarantineErr(err)
			}
			if output == "json" {
				return qWriteJSON(g.stdout, e)
			}
			return qPrintRecord(g.stdout, e, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output: text|json")
	return cmd
}

func qPrintRecord(w io.Writer, e *dlq.Entry, now time.Time) error {
	if e.Record == nil {
		_, err := fmt.Fprintf(w, "record %d on %s, stored %s: undecodable (%s)\n", e.Seq, e.Subject, e.StoredAt.Format(time.RFC3339), e.Err)
		return err
	}
	r := e.Record
	fmt.Fprintf(w, "record %d  %s  (%s)\n", e.Seq, r.Reason, r.ID)
	field := func(name, format string, args ...any) {
		fmt.Fprintf(w, "  %-12s %s\n", name, fmt.Sprintf(format, args...))
	}
	field("stored", "%s (%s ago) on %s", e.StoredAt.Format(time.RFC3339), qAge(now.Sub(e.StoredAt)), e.Subject)
	field("detail", "%s", r.Detail)
	field("persona", "%s   task %s   step %s", qDash(r.Persona), qDash(r.TaskID), qDash(r.Step))
	if r.RequestID != "" || r.CorrelationID != "" {
		field("request", "%s   correlation %s", qDash(r.RequestID), qDash(r.CorrelationID))
	}
	if r.SagaID != "" {
		field("saga", "%s", r.SagaID)
	}
	src := r.OriginalSubject
	if r.Stream != "" {
		src = fmt.Sprintf("%s  (%s seq %d)", r.OriginalSubject, r.Stream, r.Sequence)
	}
	field("source", "%s", src)
	field("attempts", "%d   deliveries %d", r.Attempts, r.Deliveries)
	if !r.FirstFailureAt.IsZero() {
		field("failures", "first %s   last %s", r.FirstFailureAt.Format(time.RFC3339), r.LastFailureAt.Format(time.RFC3339))
	}
	field("quarantined", "%s", r.QuarantinedAt.Format(time.RFC3339))
	if l := r.Lineage; l != nil {
		field("lineage", "replay %d of record %s   original request %s", l.ReplayCount, l.ReplayOf, qDash(l.OriginalRequestID))
	}
	if len(r.Headers) > 0 {
		fmt.Fprintln(w, "\nheaders")
		keys := make([]string, 0, len(r.Headers))
		for k := range r.Headers {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %s: %s\n", k, strings.Join(r.Headers[k], ", "))
		}
	}
	fmt.Fprintf(w, "\npayload (%d bytes)\n%s\n", len(r.Payload), qIndent(qPretty(r.Payload), "  "))
	fmt.Fprintln(w, "\nerror history")
	qTimeline(w, r)
	return nil
}

// qPretty indents JSON; other text is shown as is, binary as hex.
func qPretty(p []byte) string {
	var buf bytes.Buffer
	if json.Indent(&buf, p, "", "  ") == nil {
		return buf.String()
	}
	if utf8.Valid(p) {
		return string(p) + "\n(not valid JSON)"
	}
	return strings.TrimRight(hex.Dump(p), "\n")
}

func qIndent(s, pre string) string {
	return pre + strings.ReplaceAll(s, "\n", "\n"+pre)
}

func qTimeline(w io.Writer, r *schemas.QuarantineRecord) {
	if len(r.Errors) == 0 {
		msg := "  (no attempts recorded)"
		if r.Deliveries > 0 {
			msg = fmt.Sprintf("  (no attempts recorded: delivered %d times, never acknowledged — see detail)", r.Deliveries)
		}
		fmt.Fprintln(w, msg)
		return
	}
	start := r.Errors[0].At
	for _, a := range r.Errors {
		what := a.Class
		if a.ErrorType != "" {
			what += " " + a.ErrorType
		}
		agent := ""
		if a.Agent != "" {
			agent = " [" + a.Agent + "]"
		}
		progress := ""
		if a.Progress != nil {
			progress = fmt.Sprintf(" progress %d/%d", a.Progress.Completed, a.Progress.Total)
		}
		fmt.Fprintf(w, "  %s  +%-7s attempt %d%s  %s  (%dms%s)\n", a.At.Format("15:04:05.000"),
			a.At.Sub(start).Round(time.Millisecond), a.Attempt, agent, what, a.DurationMs, progress)
		if a.Error != "" {
			fmt.Fprintf(w, "      %s\n", strings.ReplaceAll(strings.TrimSpace(a.Error), "\n", "\n      "))
		}
	}
}
