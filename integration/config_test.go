//go:build integration

package integration

import (
	"fmt"
	"strings"
)

// replicaConfig is a personaq.yaml for replicas on the test network: NATS
// and Redis by alias, a short drain and pull wait, and the given personas
// (YAML under personas:, indented two spaces).
func replicaConfig(personas ...string) string {
	return fmt.Sprintf(`nats:
  urls: [nats://nats:4222]
redis:
  url: redis://redis:6379/0
  ttl: 1h
runtime:
  drain_timeout: 5s
  fetch_max_wait: 250ms
defaults:
  concurrency: 8
  max_replicas: 4
personas:
%s`, strings.Join(personas, ""))
}

// fast is the retry policy of the demo personas here: the persona preset
// (the persona timeouts' linear backoff) with 200ms between attempts instead of 30s/60s/90s.
const fast = `{preset: persona, max_attempts: 4, schedule: {type: fixed, every: 200ms}}`

// Demo personas (handlers.DemoPersonas), one per way a request can end.
var (
	// echo succeeds on attempt 1 after 200ms of work.
	echoPersona = `  echo:
    invoker: {type: demo, demo: echo}
    timeout: 2s
    policy: ` + fast + "\n"
	// flaky fails retryably on attempts 1 and 2, succeeds on 3.
	flakyPersona = `  flaky:
    invoker: {type: demo, demo: flaky}
    timeout: 2s
    policy: ` + fast + "\n"
	// terminal fails with an HTTP 400 at once: quarantined, reason terminal.
	terminalPersona = `  terminal:
    invoker: {type: demo, demo: terminal}
    timeout: 2s
    policy: ` + fast + "\n"
	// slowpoke never answers: each attempt times out after 500ms; after 4
	// the request is quarantined, reason exhausted.
	slowpokePersona = `  slowpoke:
    invoker: {type: demo, demo: slowpoke}
    timeout: 500ms
    policy: ` + fast + "\n"
	// plateau stalls at 5/9 on both agents: deferred (adaptive retry).
	plateauPersona = `  plateau:
    invoker: {type: demo, demo: plateau}
    timeout: 2s
    policy: {preset: adaptive, schedule: {type: fixed, every: 200ms}}
`
	// validator fails validation once, then succeeds with the feedback.
	validatorPersona = `  validator:
    invoker: {type: demo, demo: validator}
    timeout: 2s
    policy: ` + fast + "\n"
)

// workPersona calls the agent's /work: slow work that succeeds. Its ack
// wait is short (heartbeats every second keep live work), so a killed
// replica's messages come back within 3s.
func workPersona(agentURL string, concurrency int) string {
	return fmt.Sprintf(`  work:
    invoker: {type: http, url: %s/work}
    timeout: 10s
    ack_wait: 3s
    concurrency: %d
    policy: %s
`, agentURL, concurrency, fast)
}

// crashPersona calls the agent's /crash, which SIGKILLs the calling
// replica: a crash-looping message. MaxDeliver is one more than
// max_attempts: the replica quarantines the last delivery unrun
// (max_deliveries), before the ledger's count could end it.
func crashPersona(agentURL string) string {
	return fmt.Sprintf(`  crash:
    invoker: {type: http, url: %s/crash}
    timeout: 30s
    ack_wait: 2s
    max_deliver: 3
    policy: {preset: persona, max_attempts: 2, schedule: {type: fixed, every: 200ms}}
`, agentURL)
}

// fixablePersona calls the agent's /fixable: terminal (400) until the test
// fixes the agent.
func fixablePersona(agentURL string) string {
	return fmt.Sprintf(`  fixable:
    invoker: {type: http, url: %s/fixable}
    timeout: 2s
    policy: %s
`, agentURL, fast)
}
