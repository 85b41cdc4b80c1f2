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

	"github.com/nats-io/nats.go"
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
			insp, done, err := g.quarantineInspector(cmd)
			if err != nil {
				return err
			}
			defer done()
			e, err := insp.Get(cmd.Context(), seqs[0])
			if err != nil {
				return g.quarantineErr(cmd.Context(), err)
			}
			var msg *nats.Msg
			if e.Record != nil {
				if msg, err = insp.Message(cmd.Context(), e.Record); err != nil {
					err = g.quarantineErr(cmd.Context(), err)
				}
			}
			if output == "json" {
				if jerr := qWriteJSON(g.stdout, qShowJSON{Entry: e, Original: qOriginal(msg)}); jerr != nil {
					return jerr
				}
			} else if perr := qPrintRecord(g.stdout, e, msg, err, time.Now()); perr != nil {
				return perr
			}
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output: text|json")
	return cmd
}

// qShowMax is the most of a payload `show` prints as text.
const qShowMax = 64 << 10

// qShowJSON is `show -o json`: the stored entry and, when the record
// keeps its payload or headers out of line, the message read back.
type qShowJSON struct {
	*dlq.Entry
	Original *qOriginalJSON `json:"original,omitempty"`
}

type qOriginalJSON struct {
	// Headers are in the record's form (dlq.HeaderBase64Prefix).
	Headers map[string][]string `json:"headers,omitempty"`
	// Payload is base64, as in the record.
	Payload []byte `json:"payload"`
}

func qOriginal(msg *nats.Msg) *qOriginalJSON {
	if msg == nil {
		return nil
	}
	return &qOriginalJSON{Headers: qStoredHeaders(msg.Header), Payload: msg.Data}
}

// qStoredHeaders is h in the form a record stores headers in.
func qStoredHeaders(h nats.Header) map[string][]string {
	stored := make(map[string][]string, len(h))
	for k, vs := range h {
		for _, v := range vs {
			stored[dlq.StoredHeaderText(k)] = append(stored[dlq.StoredHeaderText(k)], dlq.StoredHeaderText(v))
		}
	}
	return stored
}

// qPrintRecord prints the entry; msg is the message it keeps as read back
// (nil with msgErr when it could not be).
func qPrintRecord(w io.Writer, e *dlq.Entry, msg *nats.Msg, msgErr error, now time.Time) error {
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
	if u := r.Usage; u != nil {
		field("usage", "%d tokens (%d in, %d out)   cost %s", u.InputTokens+u.OutputTokens, u.InputTokens, u.OutputTokens, costText(u))
	}
	if !r.FirstFailureAt.IsZero() {
		field("failures", "first %s   last %s", r.FirstFailureAt.Format(time.RFC3339), r.LastFailureAt.Format(time.RFC3339))
	}
	field("quarantined", "%s", r.QuarantinedAt.Format(time.RFC3339))
	if l := r.Lineage; l != nil {
		field("lineage", "replay %d of record %s   original request %s", l.ReplayCount, l.ReplayOf, qDash(l.OriginalRequestID))
	}
	if len(r.Headers) > 0 {
		fmt.Fprintln(w, "\nheaders")
		qPrintHeaders(w, r.Headers)
	}
	if r.HeadersRef != nil {
		fmt.Fprintf(w, "\nheaders (kept out of line: object %s in %s, %d bytes, %s)\n", r.HeadersRef.Name, r.HeadersRef.Bucket, r.HeadersRef.Size, r.HeadersRef.Digest)
		if msg != nil {
			qPrintHeaders(w, qStoredHeaders(msg.Header))
		}
	}
	where := ""
	if ref := r.PayloadRef; ref != nil {
		where = fmt.Sprintf(", kept out of line: object %s in %s, %s", ref.Name, ref.Bucket, ref.Digest)
	}
	switch {
	case msg == nil:
		fmt.Fprintf(w, "\npayload (unavailable%s)\n  %v\n", where, msgErr)
	case len(msg.Data) > qShowMax:
		fmt.Fprintf(w, "\npayload (%d bytes%s; the first %d shown, -o json has all)\n%s\n", len(msg.Data), where, qShowMax,
			qIndent(qPretty(msg.Data[:qShowMax]), "  "))
	default:
		fmt.Fprintf(w, "\npayload (%d bytes%s)\n%s\n", len(msg.Data), where, qIndent(qPretty(msg.Data), "  "))
	}
	fmt.Fprintln(w, "\nerror history")
	qTimeline(w, r)
	return nil
}

// qPrintHeaders prints headers as a record stores them: a name or value
// that is not valid UTF-8 shows as dlq.HeaderBase64Prefix and its base64.
func qPrintHeaders(w io.Writer, h map[string][]string) {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %s\n", k, strings.Join(h[k], ", "))
	}
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
		if a.Usage != nil {
			progress += " tokens " + tokensText(a.Usage)
		}
		fmt.Fprintf(w, "  %s  +%-7s attempt %d%s  %s  (%dms%s)\n", a.At.Format("15:04:05.000"),
			a.At.Sub(start).Round(time.Millisecond), a.Attempt, agent, what, a.DurationMs, progress)
		if a.Error != "" {
			fmt.Fprintf(w, "      %s\n", strings.ReplaceAll(strings.TrimSpace(a.Error), "\n", "\n      "))
		}
	}
}
