package ratelog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLimiterLetsOneLineThroughPerInterval(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	l := New(30 * time.Second)
	l.now = func() time.Time { return now }

	ok, n := l.Allow("redis down")
	require.True(t, ok)
	require.Zero(t, n)
	for range 59 { // twice a second for 29.5 s
		now = now.Add(500 * time.Millisecond)
		ok, _ = l.Allow("redis down")
		require.False(t, ok)
	}
	ok, _ = l.Allow("other line")
	require.True(t, ok, "keys are limited apart")
	now = now.Add(time.Second)
	ok, n = l.Allow("redis down")
	require.True(t, ok)
	require.Equal(t, 59, n, "the copies held back are counted")

	l.Reset("redis down")
	ok, n = l.Allow("redis down")
	require.True(t, ok, "a reset key is written at once")
	require.Zero(t, n)
}
