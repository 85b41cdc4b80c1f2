//go:build integration

package integration

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/integration/containers"
)

// A replica in a container with a memory limit sets the Go runtime's soft
// limit to 90 % of it, so the collector runs before the heap's growth at
// GOGC=100 reaches the container's limit; a GOMEMLIMIT given to the
// container wins.
func TestReplicaTakesItsMemoryLimitFromTheContainer(t *testing.T) {
	e := newEnv(t)
	const limit = 256 << 20
	cfg := replicaConfig(echoPersona)
	withLimit := func(env map[string]string) func(*containers.ReplicaOptions) {
		return func(o *containers.ReplicaOptions) { o.Memory, o.Env = limit, env }
	}
	auto, err := e.startReplica("auto", cfg, withLimit(nil))
	require.NoError(t, err)
	given, err := e.startReplica("given", cfg, withLimit(map[string]string{"GOMEMLIMIT": "100MiB", "PERSONAQ_LOG_LEVEL": "debug"}))
	require.NoError(t, err)

	line := logLine(t, e, auto, "Go memory limit set from the container's")
	require.EqualValues(t, limit, line["container_limit"])
	require.EqualValues(t, 241591910, line["gomemlimit"], "90 %% of the limit")

	line = logLine(t, e, given, "Go memory limit left as it is")
	require.Equal(t, "GOMEMLIMIT is set", line["reason"])
	require.EqualValues(t, 100<<20, line["gomemlimit"])
}

// logLine is the first JSON log line of r whose message is msg.
func logLine(t *testing.T, e *env, r *containers.Replica, msg string) map[string]any {
	t.Helper()
	logs, err := r.Logs(e.ctx)
	require.NoError(t, err)
	for l := range strings.SplitSeq(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(strings.TrimSpace(l)), &m) == nil && m["message"] == msg {
			return m
		}
	}
	t.Fatalf("%s logged no %q:\n%s", r.Alias(), msg, containers.Tail(logs, 20))
	return nil
}
