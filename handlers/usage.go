package handlers

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/personaq/personaq/retry"
)

// UsageKey is the key of a usage report a persona writes in its answer or,
// for a command, on a line of its own:
//
//	{"personaq_usage":{"input_tokens":1200,"output_tokens":300,"cost_usd":0.0042}}
//
// cost_usd is optional (0 or absent: unknown).
const UsageKey = "personaq_usage"

// usageDoc is where a JSON answer reports usage: personaq's own key, or a
// provider's usage object as model APIs return it (OpenAI chat
// completions: prompt_tokens/completion_tokens; OpenAI Responses and
// Anthropic Messages: input_tokens/output_tokens), with a cost when the
// answer states one (usage.cost_usd, or Claude Code's total_cost_usd).
type usageDoc struct {
	Personaq     *usageReport `json:"personaq_usage"`
	Usage        *usageReport `json:"usage"`
	TotalCostUSD float64      `json:"total_cost_usd"`
}

type usageReport struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	// Anthropic counts cached prompt tokens apart from input_tokens; they
	// are input too (OpenAI's prompt and input counts include them).
	CacheCreationInputTokens int64   `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64   `json:"cache_read_input_tokens"`
	CostUSD                  float64 `json:"cost_usd"`
}

func (r *usageReport) usage() retry.Usage {
	return retry.Usage{
		InputTokens:  r.InputTokens + r.PromptTokens + r.CacheCreationInputTokens + r.CacheReadInputTokens,
		OutputTokens: r.OutputTokens + r.CompletionTokens,
		CostUSD:      r.CostUSD,
	}
}

// parseUsage reads the usage a JSON document reports (see usageDoc).
// Anything else, or a negative count, reports nothing.
func parseUsage(doc []byte) (retry.Usage, bool) {
	doc = bytes.TrimSpace(doc)
	if len(doc) == 0 || doc[0] != '{' || !bytes.Contains(doc, []byte(`usage"`)) {
		return retry.Usage{}, false // the common case, without decoding
	}
	var d usageDoc
	if json.Unmarshal(doc, &d) != nil {
		return retry.Usage{}, false
	}
	var u retry.Usage
	switch {
	case d.Personaq != nil:
		u = d.Personaq.usage()
	case d.Usage != nil:
		u = d.Usage.usage()
		if u.CostUSD == 0 {
			u.CostUSD = d.TotalCostUSD
		}
	default:
		return retry.Usage{}, false
	}
	if u.InputTokens < 0 || u.OutputTokens < 0 || !(u.CostUSD >= 0) {
		return retry.Usage{}, false
	}
	return u, true
}

// usageLine is a command's usage line and nothing else.
type usageLine struct {
	Personaq json.RawMessage `json:"personaq_usage"`
}

// parseUsageLine reads a command's usage line: a JSON object whose only
// key is personaq_usage.
func parseUsageLine(line []byte) (retry.Usage, bool) {
	if !bytes.Contains(line, []byte(UsageKey)) {
		return retry.Usage{}, false // the common case, without decoding
	}
	var l usageLine
	if !reportOnly(line, &l) || len(l.Personaq) == 0 {
		return retry.Usage{}, false
	}
	return parseUsage(line)
}

// commandUsage is what a command reported: the sum of its usage lines on
// stdout; else of those on stderr (taken out of the error text, which is
// returned); else the usage object of its whole output, when that is one
// JSON document (an agent CLI's JSON result).
func commandUsage(stdout *stdoutSink, stderr string) (retry.Usage, string) {
	if stdout.usageSeen {
		return stdout.usage, stderr
	}
	if strings.Contains(stderr, UsageKey) {
		var total retry.Usage
		var seen bool
		kept := make([]string, 0, 8)
		for _, line := range strings.Split(stderr, "\n") {
			if u, ok := parseUsageLine([]byte(line)); ok {
				total, seen = total.Add(u), true
				continue
			}
			kept = append(kept, line)
		}
		if seen {
			return total, strings.TrimSpace(strings.Join(kept, "\n"))
		}
	}
	u, _ := parseUsage(stdout.out)
	return u, stderr
}
