package rdb_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/rdb"
	"github.com/personaq/personaq/integration/testenv"
)

// reply is a server's error reply, as go-redis returns it.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

var (
	errStoreDown    = fmt.Errorf("store: %w", rdb.ErrUnavailable)
	errStoreCorrupt = errors.New("store: corrupt")
	store           = rdb.Errors{Store: "store", Unavailable: errStoreDown, WrongType: errStoreCorrupt}
)

func TestWrapClassifiesOnce(t *testing.T) {
	t.Parallel()
	var _ redis.Error = reply("") // the fake is what go-redis hands back
	tests := []struct {
		name        string
		err         error
		unavailable bool
		wrongType   bool
	}{
		{"ConnectionRefused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true, false},
		{"EOF", io.EOF, true, false},
		{"ClosedClient", redis.ErrClosed, true, false},
		{"DeadlineExceeded", context.DeadlineExceeded, true, false},
		{"Loading", reply("LOADING Redis is loading the dataset in memory"), true, false},
		{"ReadOnlyReplica", reply("READONLY You can't write against a read only replica."), true, false},
		{"ClusterDown", reply("CLUSTERDOWN The cluster is down"), true, false},
		{"TryAgain", reply("TRYAGAIN Multiple keys request during rehashing of slot"), true, false},
		{"BusyScript", reply("BUSY Redis is busy running a script."), true, false},
		{"MaxClients", reply("ERR max number of clients reached"), true, false},
		{"WrongType", reply("WRONGTYPE Operation against a key holding the wrong kind of value"), false, true},
		{"WrongTypeInScript", reply("ERR Error running script (call to f_x): @user_script:1: WRONGTYPE Operation against a key"), false, true},
		{"ScriptError", reply("ERR Error running script (call to f_x): @user_script:3: user_script:3: attempt to compare nil"), false, false},
		{"NoScriptAfterFallback", reply("NOSCRIPT No matching script. Please use EVAL."), false, false},
		{"Canceled", context.Canceled, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := store.Wrap(nil, "op x", tt.err)
			require.ErrorIs(t, got, tt.err, "the original stays in the chain")
			require.Contains(t, got.Error(), "op x")
			require.Equal(t, tt.unavailable, errors.Is(got, errStoreDown), "store sentinel")
			require.Equal(t, tt.unavailable, rdb.Unavailable(got), "rdb.Unavailable")
			require.Equal(t, tt.wrongType, errors.Is(got, errStoreCorrupt))
		})
	}
	require.NoError(t, store.Wrap(nil, "op", nil))
}

func TestWrapWrongTypeDefault(t *testing.T) {
	t.Parallel()
	e := rdb.Errors{Store: "s", Unavailable: errStoreDown}
	require.ErrorIs(t, e.Wrap(nil, "op", reply("WRONGTYPE x")), rdb.ErrWrongType)
}

// A deadline of the caller's own that ran out before any call counts as
// unreachable; a shutdown does not.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	require.True(t, rdb.Unavailable(fmt.Errorf("begin: %w", context.DeadlineExceeded)))
	require.False(t, rdb.Unavailable(fmt.Errorf("begin: %w", context.Canceled)))
	require.False(t, rdb.Unavailable(errors.New("other")))
	require.False(t, rdb.Unavailable(nil))
}

// The same classification against a real server: a stopped one, a key of
// another type, a failing script.
func TestWrapAgainstRedis(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)
	c := r.Client(t)
	ctx := t.Context()
	require.NoError(t, c.Set(ctx, "str", "v", 0).Err())
	failing := redis.NewScript(`return redis.error_reply("ERR refused by the script")`)
	list := redis.NewScript(`return redis.call('LPUSH', KEYS[1], 'x')`)

	err := store.Wrap(c, "refused", failing.Run(ctx, c, nil).Err())
	require.Error(t, err)
	require.False(t, rdb.Unavailable(err), "a script's error is the call's, not Redis's: %v", err)
	require.ErrorIs(t, store.Wrap(c, "wrong type", list.Run(ctx, c, []string{"str"}).Err()), errStoreCorrupt)

	r.Stop()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = store.Wrap(c, "down", c.Ping(sctx).Err())
	require.ErrorIs(t, err, errStoreDown)
	require.True(t, rdb.Unavailable(err))
}
