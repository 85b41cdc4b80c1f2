package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/schemas"
)

// livePrinter writes a request's live output (--follow) as it comes: the
// text to stdout, what happens to it (a retry voiding it, the cap) to
// stderr beside the attempt lines.
type livePrinter struct {
	out, errw io.Writer
	// midLine: the text written so far does not end with a newline.
	midLine bool
}

// option is the client's OnOutput for this printer.
func (p *livePrinter) option() client.AwaitOption { return client.OnOutput(p.chunk) }

func (p *livePrinter) chunk(c *schemas.OutputChunk) {
	if c.Supersedes > 0 {
		p.endLine()
		fmt.Fprintf(p.errw, "output of attempt %d superseded: attempt %d starts over\n", c.Supersedes, c.Attempt)
		return
	}
	if c.Data != "" {
		_, _ = io.WriteString(p.out, c.Data)
		p.midLine = !strings.HasSuffix(c.Data, "\n")
	}
	switch {
	case c.Final && c.Truncated > 0:
		p.endLine()
		fmt.Fprintf(p.errw, "output of attempt %d: %d bytes over the live output cap not shown\n", c.Attempt, c.Truncated)
	case c.Truncated > 0:
		p.endLine()
		fmt.Fprintf(p.errw, "output of attempt %d reached the live output cap; the rest is not shown live\n", c.Attempt)
	}
}

// endLine ends a line of live text left open, so what follows (a note,
// the final output) starts on a line of its own.
func (p *livePrinter) endLine() {
	if p.midLine {
		_, _ = io.WriteString(p.out, "\n")
		p.midLine = false
	}
}

// followResult prints requestID's live output until it has a terminal
// record (or wait, when set, passes: the record lookup then says it is
// still running).
func followResult(ctx context.Context, c *client.Client, requestID string, wait time.Duration, live *livePrinter) error {
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	_, err := c.Await(ctx, requestID, live.option())
	live.endLine()
	var stopped *client.StoppedError
	if err == nil || errors.As(err, &stopped) || errors.Is(err, context.DeadlineExceeded) {
		return nil // the record, or its absence, is shown next
	}
	return err
}
