package testenv_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/integration/testenv"
)

// The server run as its own process stores on file and is gone after Stop.
func TestNATSProcess(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATSProcess(t)
	js := n.JetStream(t)
	ctx := context.Background()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Storage: jetstream.FileStorage})
	require.NoError(t, err)
	ack, err := js.Publish(ctx, "t.1", []byte("x"))
	require.NoError(t, err)
	require.EqualValues(t, 1, ack.Sequence)
	require.Positive(t, n.PeakRSS(), "the process's peak RSS is read from /proc")
	n.Stop()
	require.Zero(t, n.PeakRSS(), "no process after Stop")
}
