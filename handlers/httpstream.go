package handlers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/personaq/personaq/retry"
)

// streamKind is how a 2xx answer streams, from its Content-Type.
type streamKind int

const (
	notStreamed  streamKind = iota
	streamSSE               // text/event-stream
	streamNDJSON            // application/x-ndjson (or jsonl)
)

func streamKindOf(h http.Header) streamKind {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return notStreamed
	}
	switch mt {
	case "text/event-stream":
		return streamSSE
	case "application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines":
		return streamNDJSON
	}
	return notStreamed
}

// streamAnswer reads a streamed 2xx answer event by event: the text of
// each goes to the attempt's live output writer as it arrives, progress
// and usage are read from every event, and the output is the text put
// together (see outputOf). The answer's whole size is bounded like a plain
// one's.
func (h *HTTPInvoker) streamAnswer(ctx context.Context, resp *http.Response, kind streamKind) (Result, error) {
	limit := h.cfg.MaxResponseBytes
	body := &countingReader{r: io.LimitReader(resp.Body, limit+1)}
	a := &streamAssembler{live: OutputWriter(ctx)}
	var readErr error
	if kind == streamSSE {
		readErr = readSSE(body, a.event)
	} else {
		readErr = readLines(body, a.event)
	}
	res := Result{Output: outputOf(a.text.Bytes()), Progress: a.progress, Usage: a.usage}
	switch {
	case body.n > limit:
		return res, Terminal(fmt.Errorf("%w: over %d bytes", ErrResponseTooLarge, limit))
	case errors.Is(readErr, bufio.ErrTooLong):
		return res, Terminal(fmt.Errorf("%w: a line over %d bytes", ErrResponseTooLarge, maxStreamLine))
	case readErr != nil:
		return res, transportError(ctx, readErr)
	}
	return res, nil
}

// streamAssembler collects a streamed answer.
type streamAssembler struct {
	live     io.Writer
	text     bytes.Buffer
	progress retry.Progress
	usage    retry.Usage
}

// event takes one event's data (an SSE event's, an NDJSON line).
func (a *streamAssembler) event(data []byte) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "[DONE]" {
		return
	}
	if data[0] != '{' { // not JSON: the data is the text
		a.add(string(data))
		return
	}
	if p, ok := parseProgress(data); ok {
		a.progress = p
	}
	if u, ok := eventUsage(data); ok {
		a.usage = maxUsage(a.usage, u)
	}
	a.add(deltaText(data))
}

func (a *streamAssembler) add(s string) {
	if s == "" {
		return
	}
	a.text.WriteString(s)
	_, _ = io.WriteString(a.live, s) // never fails: see OutputWriter
}

// maxUsage keeps, for each count, the largest any event reported:
// OpenAI reports usage once, Anthropic's counts are cumulative (input in
// message_start, output in each message_delta).
func maxUsage(a, b retry.Usage) retry.Usage {
	return retry.Usage{InputTokens: max(a.InputTokens, b.InputTokens), OutputTokens: max(a.OutputTokens, b.OutputTokens),
		CostUSD: max(a.CostUSD, b.CostUSD)}
}

// readSSE calls event with the data of each server-sent event (its data
// lines joined by "\n"); comments, ids and event names are skipped.
func readSSE(r io.Reader, event func([]byte)) error {
	var data []byte
	has := false
	err := scanLines(r, func(line []byte) {
		switch {
		case len(line) == 0:
			if has {
				event(data)
			}
			data, has = data[:0], false
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			if has {
				data = append(data, '\n')
			}
			data, has = append(data, v...), true
		}
	})
	if has { // the stream ended without the blank line
		event(data)
	}
	return err
}

// readLines calls event with each line.
func readLines(r io.Reader, event func([]byte)) error {
	return scanLines(r, event)
}

// maxStreamLine bounds one line of a streamed answer (the whole answer is
// bounded by MaxResponseBytes anyway).
const maxStreamLine = 4 << 20

// scanLines calls line with each line of r, without its "\n" or "\r\n".
func scanLines(r io.Reader, line func([]byte)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 16<<10), maxStreamLine)
	for sc.Scan() {
		line(bytes.TrimSuffix(sc.Bytes(), []byte("\r")))
	}
	return sc.Err()
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// eventUsage reads the usage one streamed event reports: at its top level,
// or in its message (Anthropic's message_start).
func eventUsage(data []byte) (retry.Usage, bool) {
	if u, ok := parseUsage(data); ok {
		return u, true
	}
	if !bytes.Contains(data, []byte(`"message_start"`)) {
		return retry.Usage{}, false // the common case, without decoding
	}
	var start struct {
		Message json.RawMessage `json:"message"`
	}
	if json.Unmarshal(data, &start) != nil {
		return retry.Usage{}, false
	}
	return parseUsage(start.Message)
}
