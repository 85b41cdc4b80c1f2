package advisory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCaptureRetryDelayDoublesUpToACap(t *testing.T) {
	t.Parallel()
	want := []time.Duration{5, 10, 20, 40, 80, 160, 300, 300}
	for i, w := range want {
		require.Equal(t, w*time.Second, captureRetryDelay(5*time.Second, uint64(i+1)), "failure %d", i+1)
	}
	require.Equal(t, maxCaptureRetry, captureRetryDelay(5*time.Second, 1<<40))
}
