package ledger_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
)

// TestScriptCommandsPerAttempt pins the Redis commands the scripts run for
// an attempt as the runtime makes it (Begin with a lease and an
// idempotency key, Finish fenced by the lease): inside a script every
// redis.call costs the server far more than the command itself (its
// arguments and reply are converted between Lua and Redis), so a script
// that reads the step's hash once and skips what changes nothing is most
// of the ledger's CPU saved.
func TestScriptCommandsPerAttempt(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)
	c := r.Client(t)
	ctx := context.Background()
	l, err := ledger.New(ledger.Config{Client: c, Prefix: "calls"})
	require.NoError(t, err)
	attempt := func(key ledger.StepKey, req string, class retry.Class) {
		t.Helper()
		bg, err := l.Begin(ctx, key, req, ledger.WithLease(20*time.Second), ledger.WithIdempotencyKey("k."+req+"."+strconv.Itoa(int(class))))
		require.NoError(t, err)
		a := retry.Attempt{Number: bg.Attempt, Agent: "claude", Class: class}
		ok := class == retry.ClassSucceeded
		require.NoError(t, l.Finish(ctx, key, a, ledger.FinishOptions{Counted: true, Succeeded: ok, RequestID: req, Lease: bg.Lease}))
	}
	attempt(ledger.StepKey{TaskID: "warm-up"}, "warm", retry.ClassSucceeded) // loads the scripts

	for _, tc := range []struct {
		name string
		// before runs first, uncounted.
		before func(key ledger.StepKey)
		want   map[string]int
	}{{
		name:   "first attempt succeeds",
		before: func(ledger.StepKey) {},
		// Begin: hgetall get set hset pexpire (no history to read: the
		// step has no records yet); Finish: get del hdel rpush hincrby hset
		// pexpire pexpire.
		want: map[string]int{"hgetall": 1, "get": 2, "set": 1, "hset": 2, "pexpire": 3,
			"del": 1, "hdel": 1, "rpush": 1, "hincrby": 1},
	}, {
		name:   "second attempt succeeds after a failure",
		before: func(key ledger.StepKey) { attempt(key, "req-1", retry.ClassValidation) },
		// As above, and Begin keeps the history's time to live too.
		want: map[string]int{"hgetall": 1, "get": 2, "set": 1, "hset": 2, "lrange": 1, "pexpire": 4,
			"del": 1, "hdel": 1, "rpush": 1, "hincrby": 1},
	}} {
		key := ledger.StepKey{TaskID: strings.ReplaceAll(tc.name, " ", "-"), Step: "implement"}
		tc.before(key)
		require.NoError(t, c.ConfigResetStat(ctx).Err())
		attempt(key, "req-2", retry.ClassSucceeded)
		require.Equal(t, tc.want, innerCommands(t, c), tc.name)
	}
}

// innerCommands is INFO commandstats without the calls that are not a
// script's own: the scripts themselves and what the client and test send.
func innerCommands(t *testing.T, c redis.UniversalClient) map[string]int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	got := map[string]int{}
	for _, line := range strings.Split(info, "\r\n") {
		name, stats, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		switch strings.SplitN(name, "|", 2)[0] {
		case "evalsha", "eval", "script", "config", "info", "hello", "ping", "client":
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
		n, err := strconv.Atoi(calls)
		require.NoError(t, err, line)
		got[name] = n
	}
	return got
}
