package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
)

// TestTaskShowOnRedisCluster reads tasks whose keys live on different
// masters of a Redis Cluster, found through a config file's redis.addrs and
// prefix, as serve writes them.
func TestTaskShowOnRedisCluster(t *testing.T) {
	t.Parallel()
	c := testenv.StartRedisCluster(t, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := ledger.New(ledger.Config{Client: c.Client(t), Prefix: "pq-eu"})
	require.NoError(t, err)

	// Two tasks served by different masters.
	masterOf := func(task string) *testenv.Redis {
		slot, err := c.KeySlot(ctx, "{"+task+"}")
		require.NoError(t, err)
		m, err := c.MasterOf(ctx, slot)
		require.NoError(t, err)
		return m
	}
	tasks := []string{"task-0"}
	for i := 1; len(tasks) < 2; i++ {
		if task := fmt.Sprintf("task-%d", i); masterOf(task) != masterOf(tasks[0]) {
			tasks = append(tasks, task)
		}
	}
	for _, task := range tasks {
		for n, step := range []string{"plan@req-1", "code@req-2"} {
			k := ledger.StepKey{TaskID: task, Step: step}
			for a := 1; a <= n+1; a++ {
				_, err := l.Begin(ctx, k, "req")
				require.NoError(t, err)
				require.NoError(t, l.Finish(ctx, k, retry.Attempt{Number: a, Agent: "agent-a", Class: retry.ClassRetryable, Error: "boom"},
					ledger.FinishOptions{Counted: true, RequestID: "req"}))
			}
		}
	}

	cfg := filepath.Join(t.TempDir(), "personaq.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`
redis:
  addrs: [`+strings.Join(c.Addrs()[:2], ", ")+`]
  prefix: pq-eu
personas:
  echo:
    invoker: {type: demo, demo: echo}
`), 0o600))
	for _, task := range tasks {
		code, out, errOut := run(t, ctx, "--nats-url", "nats://127.0.0.1:1", "task", "show", task, "--config", cfg, "-o", "json")
		require.Equal(t, 0, code, errOut)
		var got struct {
			Steps []struct {
				Step     string            `json:"step"`
				Attempts []json.RawMessage `json:"attempts"`
			} `json:"steps"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &got), out)
		require.Len(t, got.Steps, 2)
		require.Equal(t, "code", got.Steps[0].Step)
		require.Len(t, got.Steps[0].Attempts, 2)
		require.Equal(t, "plan", got.Steps[1].Step)
		require.Len(t, got.Steps[1].Attempts, 1)
	}

	code, _, errOut := run(t, ctx, "task", "show", "task-0", "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "missing.yaml")
}
