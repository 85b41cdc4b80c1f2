package handlers

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeltaText: the text one streamed event adds, in each shape read, and
// nothing from events that carry no text (tool calls, thinking, usage,
// role changes).
func TestDeltaText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, doc, want string }{
		{"Personaq", `{"personaq_output":"hi "}`, "hi "},
		{"OpenAIChat", `{"choices":[{"index":0,"delta":{"content":"hi"}}]}`, "hi"},
		{"OpenAIChatRole", `{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`, ""},
		{"OpenAIChatToolCall", `{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"{\"a\""}}]}}]}`, ""},
		{"OpenAIUsage", `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}`, ""},
		{"AnthropicText", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`, "hi"},
		{"AnthropicToolJSON", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}`, ""},
		{"AnthropicThinking", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`, ""},
		{"AnthropicMessageDelta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}`, ""},
		{"AnthropicMessageStart", `{"type":"message_start","message":{"id":"m","content":[],"usage":{"input_tokens":5}}}`, ""},
		{"ResponsesText", `{"type":"response.output_text.delta","delta":"hi"}`, "hi"},
		{"ResponsesToolArgs", `{"type":"response.function_call_arguments.delta","delta":"{\"a\""}`, ""},
		{"OllamaChat", `{"model":"m","message":{"role":"assistant","content":"hi"},"done":false}`, "hi"},
		{"OllamaGenerate", `{"model":"m","response":"hi","done":false}`, "hi"},
		{"NotJSON", `hi`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, deltaText([]byte(tc.doc)))
		})
	}
}

// TestParseOutputLine: only a line that is the output key alone, with a
// string, is a live output line.
func TestParseOutputLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line, text string
		ok         bool
	}{
		{`{"personaq_output":"hi\n"}`, "hi\n", true},
		{` {"personaq_output":""} `, "", true},
		{`{"personaq_output":"hi","other":1}`, "", false},
		{`{"personaq_output":5}`, "", false},
		{`{"personaq_output":null}`, "", false},
		{`{"progress":{"completed":1,"total":2}}`, "", false},
		{`{"personaq_usage":{"input_tokens":1,"output_tokens":2}}`, "", false},
		{`personaq_output: hi`, "", false},
	} {
		text, ok := parseOutputLine([]byte(tc.line))
		require.Equal(t, tc.ok, ok, tc.line)
		require.Equal(t, tc.text, text, tc.line)
	}
}
