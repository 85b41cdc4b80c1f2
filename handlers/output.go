package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
)

// OutputKey is the key of a command persona's live output line: a JSON
// object whose only key it is, with the text as a string value.
//
//	{"personaq_output":"The plan has three steps.\n"}
//
// The text is streamed to callers as it is (add the "\n" you want); the
// line itself is left out of the final output, like a usage line.
const OutputKey = "personaq_output"

type outputKey struct{}

// WithOutput returns ctx carrying w as the attempt's live output writer
// (the runtime sets it; OutputWriter finds it).
func WithOutput(ctx context.Context, w io.Writer) context.Context {
	return context.WithValue(ctx, outputKey{}, w)
}

// OutputWriter returns the live output writer of the attempt ctx belongs
// to: text written to it reaches callers following the request while the
// handler still works (the Go client's OnOutput, the API's output events,
// `personaq result --follow`). It never blocks and never fails: the
// runtime buffers, coalesces and publishes in the background, and drops
// (and counts) what passes the attempt's cap. The final output is still
// the Result's. Outside an attempt it is io.Discard.
func OutputWriter(ctx context.Context) io.Writer {
	if w, ok := ctx.Value(outputKey{}).(io.Writer); ok && w != nil {
		return w
	}
	return io.Discard
}

// outputLine is a command's live output line and nothing else.
type outputLine struct {
	Text *string `json:"personaq_output"`
}

// parseOutputLine reads a command's live output line (see OutputKey).
func parseOutputLine(line []byte) (string, bool) {
	if !bytes.Contains(line, []byte(OutputKey)) {
		return "", false // the common case, without decoding
	}
	var l outputLine
	if !reportOnly(line, &l) || l.Text == nil {
		return "", false
	}
	return *l.Text, true
}

// streamDelta is the text of one event of a streaming answer, in the
// shapes model APIs and agent servers stream: personaq's own output key;
// OpenAI chat completions (choices[].delta.content); Anthropic Messages
// (content_block_delta's delta.text); OpenAI Responses
// (response.output_text.delta's delta); Ollama (message.content or
// response).
type streamDelta struct {
	Personaq *string `json:"personaq_output"`
	Type     string  `json:"type"`
	Choices  []struct {
		Delta struct {
			Content *string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Delta   json.RawMessage `json:"delta"`
	Message *struct {
		Content *string `json:"content"`
	} `json:"message"`
	Response *string `json:"response"`
}

// deltaText is the text one streamed JSON event adds ("" when none).
func deltaText(doc []byte) string {
	var d streamDelta
	if json.Unmarshal(doc, &d) != nil {
		return ""
	}
	switch {
	case d.Personaq != nil:
		return *d.Personaq
	case len(d.Choices) > 0:
		var s string
		for _, c := range d.Choices {
			if c.Delta.Content != nil {
				s += *c.Delta.Content
			}
		}
		return s
	case len(d.Delta) > 0 && (d.Type == "" || strings.HasSuffix(d.Type, "text_delta") || strings.HasSuffix(d.Type, "output_text.delta") || d.Type == "content_block_delta"):
		// Other typed deltas (tool call arguments, thinking) are not text.
		return anthropicOrResponsesDelta(d.Delta)
	case d.Message != nil && d.Message.Content != nil:
		return *d.Message.Content
	case d.Response != nil:
		return *d.Response
	}
	return ""
}

// anthropicOrResponsesDelta reads {"text":"…"} (Anthropic's text_delta;
// its input_json_delta and thinking_delta carry no "text") or a plain
// string (OpenAI Responses' output_text delta).
func anthropicOrResponsesDelta(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var td struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &td) // anything else adds no text
	return td.Text
}
