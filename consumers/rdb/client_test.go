package rdb_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/rdb"
)

// NewClient bounds what go-redis leaves at its slow defaults and keeps
// what the caller set.
func TestNewClientTightensUnsetTimeouts(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		in                redis.UniversalOptions
		dial, read, write time.Duration
		retries           int
	}{
		"Defaults": {in: redis.UniversalOptions{Addrs: []string{"127.0.0.1:1"}},
			dial: rdb.DialTimeout, read: rdb.IOTimeout, write: rdb.IOTimeout, retries: rdb.MaxRetries},
		"CallerWins": {in: redis.UniversalOptions{Addrs: []string{"127.0.0.1:1"}, DialTimeout: 7 * time.Second,
			ReadTimeout: 8 * time.Second, WriteTimeout: 9 * time.Second, MaxRetries: -1},
			dial: 7 * time.Second, read: 8 * time.Second, write: 9 * time.Second, retries: 0}, // -1: none, stored as 0
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := tc.in
			c := rdb.NewClient(&in)
			defer c.Close()
			require.Equal(t, tc.in, in, "the caller's options are not modified")
			rc, ok := c.(*redis.Client)
			require.True(t, ok, "one address: a plain client, got %T", c)
			o := rc.Options()
			require.Equal(t, tc.dial, o.DialTimeout)
			require.Equal(t, tc.read, o.ReadTimeout)
			require.Equal(t, tc.write, o.WriteTimeout)
			require.Equal(t, tc.retries, o.MaxRetries)
		})
	}
}

// A URL keeps its own settings; a bad one is a config error.
func TestNewClientURL(t *testing.T) {
	t.Parallel()
	c, err := rdb.NewClientURL("redis://127.0.0.1:1/3?read_timeout=5s")
	require.NoError(t, err)
	defer c.Close()
	o := c.(*redis.Client).Options()
	require.Equal(t, 3, o.DB)
	require.Equal(t, 5*time.Second, o.ReadTimeout)
	require.Equal(t, rdb.DialTimeout, o.DialTimeout)
	_, err = rdb.NewClientURL("http://nope")
	require.ErrorIs(t, err, rdb.ErrInvalidConfig)
}
