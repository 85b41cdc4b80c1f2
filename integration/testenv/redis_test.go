package testenv

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestStartRedis(t *testing.T) {
	t.Parallel()
	r := StartRedis(t)
	require.True(t, strings.HasPrefix(r.Addr, "127.0.0.1:"), r.Addr)
	require.Equal(t, "redis://"+r.Addr+"/0", r.URL())

	ctx := context.Background()
	c := r.Client(t)
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	got, err := c.Get(ctx, "k").Result()
	require.NoError(t, err)
	require.Equal(t, "v", got)

	// Persistence is off: nothing is written to disk on its own.
	cfg, err := c.ConfigGet(ctx, "save").Result()
	require.NoError(t, err)
	require.Equal(t, "", cfg["save"])
}

func TestRedisStopRestart(t *testing.T) {
	t.Parallel()
	r := StartRedis(t)
	ctx := context.Background()
	// Fail fast while the server is down, retry once after the restart (the
	// pooled connection is dead then).
	c := redis.NewClient(&redis.Options{Addr: r.Addr, DialerRetries: 1, MaxRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())

	r.Stop()
	r.Stop() // idempotent
	start := time.Now()
	err := c.Ping(ctx).Err()
	require.Error(t, err)
	require.Less(t, time.Since(start), 2*time.Second)

	addr := r.Addr
	r.Restart(t)
	require.Equal(t, addr, r.Addr, "restart keeps the port")
	require.NoError(t, c.Ping(ctx).Err())
	// No persistence: the restarted server is empty.
	_, err = c.Get(ctx, "k").Result()
	require.Error(t, err)
}

func TestRedisServerMissing(t *testing.T) {
	// t.Setenv forbids t.Parallel.
	t.Setenv(RedisServerEnv, filepath.Join(t.TempDir(), "no-such-redis-server"))
	_, err := findRedisServer()
	require.Error(t, err)
	require.Contains(t, err.Error(), RedisServerEnv)

	t.Setenv(RedisServerEnv, "")
	t.Setenv("PATH", t.TempDir())
	bin, err := findRedisServer()
	if err == nil {
		// Found in /usr/bin or /usr/sbin despite the empty PATH.
		require.Contains(t, []string{"/usr/bin/redis-server", "/usr/sbin/redis-server"}, bin)
		return
	}
	require.Contains(t, err.Error(), "apt-get install redis-server")
}

func TestWaitPingGivesUpWhenProcessExits(t *testing.T) {
	t.Parallel()
	exited := make(chan struct{})
	close(exited)
	port, err := freePort()
	require.NoError(t, err)
	err = waitPing("127.0.0.1:"+strconv.Itoa(port), exited)
	require.Error(t, err)
	require.False(t, errors.Is(err, context.DeadlineExceeded))
}
