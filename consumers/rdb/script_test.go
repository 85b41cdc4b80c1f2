package rdb_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/rdb"
	"github.com/personaq/personaq/integration/testenv"
)

// countScript counts its calls in KEYS[1] and returns ARGV[1].
var countScript = redis.NewScript(`redis.call('INCR', KEYS[1]); return ARGV[1]`)

// A server without the scripts (new, restarted, SCRIPT FLUSH) runs every
// call once, alone or in a pipeline: NOSCRIPT calls did not run and are
// sent again with their body.
func TestPipelineAfterScriptFlush(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)
	c := r.Client(t)
	ctx := t.Context()
	tests := []struct {
		name string
		args []string
	}{
		{"Alone", []string{"a"}},
		{"Pipelined", []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, c.ScriptFlush(ctx).Err())
			key := "calls:" + tt.name
			calls := make([]*rdb.Call, len(tt.args))
			for i, a := range tt.args {
				calls[i] = &rdb.Call{Script: countScript, Keys: []string{key}, Args: []any{a}}
			}
			rdb.Pipeline(ctx, c, calls)
			for i, want := range tt.args {
				got, err := calls[i].Cmd.Text()
				require.NoError(t, err)
				require.Equal(t, want, got)
			}
			n, err := c.Get(ctx, key).Int()
			require.NoError(t, err)
			require.Equal(t, len(tt.args), n, "each call ran once")
		})
	}
}
