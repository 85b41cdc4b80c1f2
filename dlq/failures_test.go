package dlq_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/dlq"
)

// The capture failures the max-deliveries listener counts through the
// writer are what `quarantine stats` lists, per message, until cleared; a
// failure noted after its capture's context ended still counts, and a
// writer without an index counts nothing and fails nothing.
func TestCaptureFailuresAreCountedUntilCleared(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	stream := b.topo.RequestsStream
	require.Equal(t, 1, b.w.NoteCaptureFailure(ctx(t), stream, 7, errors.New("first")))
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	require.Equal(t, 2, b.w.NoteCaptureFailure(ended, stream, 7, errors.New("permission denied")))
	require.Equal(t, 1, b.w.NoteCaptureFailure(ctx(t), stream, 3, errors.New("other")))

	st, err := b.insp.Stats(ctx(t))
	require.NoError(t, err)
	require.Len(t, st.CaptureFailing, 2)
	require.EqualValues(t, 3, st.CaptureFailing[0].Seq, "oldest message first")
	got := st.CaptureFailing[1]
	require.Equal(t, stream, got.Stream)
	require.EqualValues(t, 7, got.Seq)
	require.Equal(t, 2, got.Failures)
	require.Equal(t, "permission denied", got.Error, "the last failure's error")
	require.False(t, got.At.IsZero())

	b.w.ClearCaptureFailure(ctx(t), stream, 7)
	b.w.ClearCaptureFailure(ctx(t), stream, 99) // nothing counted: a no-op
	st, err = b.insp.Stats(ctx(t))
	require.NoError(t, err)
	require.Len(t, st.CaptureFailing, 1)
	require.EqualValues(t, 3, st.CaptureFailing[0].Seq)

	plain := dlq.NewWriter(b.js, b.topo.QuarantineSubject, dlq.WithoutIndex())
	require.Zero(t, plain.NoteCaptureFailure(ctx(t), stream, 5, errors.New("x")))
	plain.ClearCaptureFailure(ctx(t), stream, 5)
}
