package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/saga"
	"github.com/personaq/personaq/integration/testenv"
)

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "handler.sh")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return p
}

func sagas(t *testing.T, url string) map[string]saga.Saga {
	t.Helper()
	code, out, errOut := qrun(t, url, "compensate", "ls", "-o", "json")
	require.Equal(t, 0, code, errOut)
	var list []saga.Saga
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	m := map[string]saga.Saga{}
	for _, s := range list {
		m[s.ID] = s
	}
	return m
}

// Saga compensation through the CLI: a failing branch deletion quarantines its saga
// and makes the sweep exit 1, the healthy sibling is compensated, and a
// second sweep is a no-op that exits 0.
func TestCompensateSweepWithCommandHandlers(t *testing.T) {
	t.Parallel()
	url := testenv.StartNATS(t).URL()
	for _, args := range [][]string{
		{"--saga", "saga-42", "--kind", "DELETE_BRANCH", "--target", "loop/42"},
		{"--saga", "saga-43", "--kind", "REMOVE_WORKTREE", "--target", "/work/trees/loop-43"},
	} {
		code, out, errOut := qrun(t, url, append([]string{"compensate", "publish"}, args...)...)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "published compensation")
	}
	require.Equal(t, saga.Running, sagas(t, url)["saga-42"].State)

	protected := script(t, `echo "protected branch: $1 ($PERSONAQ_SAGA_ID)" >&2; exit 1`)
	ok := script(t, `test "$PERSONAQ_COMPENSATION_KIND" = REMOVE_WORKTREE`)
	sweep := []string{"compensate", "sweep", "--handler", "DELETE_BRANCH=" + protected, "--handler", "REMOVE_WORKTREE=" + ok}
	code, out, errOut := qrun(t, url, sweep...)
	require.Equal(t, 1, code, "a failed saga makes the sweep exit non-zero")
	require.Contains(t, out, "compensation sweep: 1 compensated, 1 failed")
	require.Contains(t, out, "compensated  saga-43")
	require.Contains(t, out, "FAILED       saga saga-42: branch deletion failed for DELETE_BRANCH loop/42: protected branch: loop/42 (saga-42)")
	require.Contains(t, errOut, "1 compensation(s) failed")

	got := sagas(t, url)
	require.Equal(t, saga.Quarantined, got["saga-42"].State)
	require.Equal(t, 1, got["saga-42"].Attempts, "exit 1 is terminal: not retried")
	require.Equal(t, saga.Compensated, got["saga-43"].State)

	code, out, _ = qrun(t, url, "quarantine", "ls", "--reason", "compensation_failed")
	require.Equal(t, 0, code)
	require.Contains(t, out, "saga-42")
	require.Contains(t, out, "protected branch: loop/42")

	code, out, errOut = qrun(t, url, sweep...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "compensation sweep: 0 compensated, 0 failed\n", out)

	code, out, _ = qrun(t, url, "compensate", "ls", "--running")
	require.Equal(t, 0, code)
	require.Equal(t, "no sagas recorded\n", out)
	code, out, _ = qrun(t, url, "compensate", "ls")
	require.Equal(t, 0, code)
	require.Regexp(t, `saga-42\s+QUARANTINED\s+DELETE_BRANCH\s+loop/42`, out)
}

func TestCompensateSweepRetriesTempfail(t *testing.T) {
	t.Parallel()
	url := testenv.StartNATS(t).URL()
	code, _, errOut := qrun(t, url, "compensate", "publish", "--saga", "s1", "--kind", "DELETE_BRANCH", "--target", "loop/1")
	require.Equal(t, 0, code, errOut)
	marker := filepath.Join(t.TempDir(), "tried")
	flaky := script(t, `if [ -e "`+marker+`" ]; then exit 0; fi; touch "`+marker+`"; echo "index.lock exists" >&2; exit 75`)
	code, out, errOut := qrun(t, url, "compensate", "sweep", "--handler", "DELETE_BRANCH="+flaky, "-o", "json")
	require.Equal(t, 0, code, errOut)
	var rep saga.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, []string{"s1"}, rep.Recovered)
	require.Equal(t, 2, sagas(t, url)["s1"].Attempts)
}

// A retry scheduled past --max-wait is left to a later sweep: the sweep
// names the saga still retrying and exits 6; the saga stays RUNNING.
func TestCompensateSweepMaxWait(t *testing.T) {
	t.Parallel()
	url := testenv.StartNATS(t).URL()
	code, _, errOut := qrun(t, url, "compensate", "publish", "--saga", "s-wait", "--kind", "DELETE_BRANCH", "--target", "loop/2")
	require.Equal(t, 0, code, errOut)
	busy := script(t, `echo "index.lock exists" >&2; exit 75`)
	code, out, errOut := qrun(t, url, "compensate", "sweep", "--handler", "DELETE_BRANCH="+busy, "--max-wait", "300ms")
	require.Equal(t, 6, code, errOut)
	require.Contains(t, out, "compensation sweep: 0 compensated, 0 failed, 1 still retrying")
	require.Contains(t, out, "RETRYING     saga s-wait: DELETE_BRANCH loop/2: 1 of 2 attempts made")
	require.Contains(t, out, "index.lock exists")
	require.Contains(t, errOut, "1 compensation(s) still retrying after --max-wait 300ms")
	got := sagas(t, url)["s-wait"]
	require.Equal(t, saga.Running, got.State)
	require.Equal(t, 1, got.Attempts)
}

func TestCompensateDemoAndUnknownKind(t *testing.T) {
	t.Parallel()
	url := testenv.StartNATS(t).URL()
	for _, a := range [][]string{
		{"--saga", "s-main", "--kind", "DELETE_BRANCH", "--target", "main"},
		{"--saga", "s-feat", "--kind", "DELETE_BRANCH", "--target", "feature/x"},
		{"--saga", "s-lock", "--kind", "RELEASE_LOCK", "--target", "lock/1"},
	} {
		code, _, errOut := qrun(t, url, append([]string{"compensate", "publish"}, a...)...)
		require.Equal(t, 0, code, errOut)
	}
	code, out, _ := qrun(t, url, "compensate", "sweep", "--demo")
	require.Equal(t, 1, code)
	require.Contains(t, out, "1 compensated, 2 failed")
	require.Contains(t, out, "saga s-main: branch deletion failed for DELETE_BRANCH main: protected branch")
	require.Contains(t, out, "saga s-lock: no compensation handler registered for RELEASE_LOCK lock/1")

	code, out, _ = qrun(t, url, "compensate", "publish", "--saga", "s-main", "--kind", "DELETE_BRANCH", "--target", "main")
	require.Equal(t, 0, code)
	require.Contains(t, out, "already QUARANTINED")
}

func TestCompensateFlagErrors(t *testing.T) {
	t.Parallel()
	url := testenv.StartNATS(t).URL()
	cases := map[string]struct {
		args []string
		want string
	}{
		"NoHandlers":   {[]string{"compensate", "sweep"}, "no compensation handlers"},
		"BadHandler":   {[]string{"compensate", "sweep", "--handler", "nope"}, "--handler"},
		"BadKind":      {[]string{"compensate", "publish", "--saga", "s", "--kind", "lower", "--target", "x"}, "kind"},
		"MissingSaga":  {[]string{"compensate", "publish", "--kind", "DELETE_BRANCH", "--target", "x"}, "saga"},
		"BadArgs":      {[]string{"compensate", "publish", "--saga", "s", "--kind", "X", "--target", "x", "--args", "{"}, "--args"},
		"BadAttempts":  {[]string{"compensate", "sweep", "--demo", "--attempts", "0"}, "--attempts"},
		"BadMaxWait":   {[]string{"compensate", "sweep", "--demo", "--max-wait", "0s"}, "--max-wait"},
		"Unreachable":  {[]string{"--nats-url", "nats://127.0.0.1:1", "compensate", "sweep", "--demo"}, "nats://127.0.0.1:1"},
		"UnreachableP": {[]string{"--nats-url", "nats://127.0.0.1:1", "compensate", "publish", "--saga", "s", "--kind", "X", "--target", "x"}, "nats://127.0.0.1:1"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, _, errOut := qrun(t, url, c.args...)
			require.NotEqual(t, 0, code)
			require.True(t, strings.Contains(errOut, c.want), "%q does not name %q", errOut, c.want)
		})
	}
}
