package cli

import (
	"context"
	"runtime/debug"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/wire"
)

// A GOMEMLIMIT is for personaq's heap: the embedded nats-server sizes its
// JetStream memory from the machine, as a server of its own would, so
// `personaq dev` still provisions its streams (the live output stream
// reserves 256 MiB of memory storage) under GOMEMLIMIT=200MiB. Not
// parallel: the memory limit is the whole test process's.
func TestEmbeddedServerLeavesGOMEMLIMITToPersonaq(t *testing.T) {
	prev := debug.SetMemoryLimit(200 << 20)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	s, err := startEmbeddedNATS(t.TempDir(), "")
	require.NoError(t, err)
	t.Cleanup(s.Shutdown)
	nc, err := nats.Connect(s.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, consumers.Provision(ctx, js, wire.Topology{}.WithDefaults(), nil))
}

func TestEmbeddedMaxMemory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ mem, want int64 }{
		{0, 0},  // unknown: the server's default
		{-1, 0}, // likewise
		{8 << 30, 6 << 30},
		{1 << 30, 768 << 20},
	} {
		require.Equal(t, tc.want, embeddedMaxMemory(tc.mem), "memory %d", tc.mem)
	}
}
