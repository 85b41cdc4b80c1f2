package cli

import (
	"bytes"
	"errors"
	"math"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

func TestDecideMemoryLimit(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	unreadable := errors.New("permission denied")
	for name, tc := range map[string]struct {
		ratio     float64
		envSet    bool
		container uint64
		err       error
		want      int64
		reason    string
	}{
		"FromContainer":     {ratio: 0.9, container: 256 * mib, want: 241591910, reason: "container memory limit"},
		"WholeContainer":    {ratio: 1, container: 160 * mib, want: 160 * mib, reason: "container memory limit"},
		"Off":               {ratio: 0, container: 256 * mib, reason: "off"},
		"GOMEMLIMITWins":    {ratio: 0.9, envSet: true, container: 256 * mib, reason: "GOMEMLIMIT is set"},
		"NoContainerLimit":  {ratio: 0.9, err: memlimit.ErrNoLimit, reason: "no container memory limit"},
		"NotInCgroup":       {ratio: 0.9, err: memlimit.ErrNoCgroup, reason: "unreadable: process is not in cgroup"},
		"UnreadableLimit":   {ratio: 0.9, err: unreadable, reason: "unreadable: permission denied"},
		"RatioAppliedFloor": {ratio: 0.5, container: 3, want: 1, reason: "container memory limit"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := decideMemoryLimit(tc.ratio, tc.envSet, tc.container, tc.err)
			require.Equal(t, tc.want, got.limit)
			require.Contains(t, got.reason, tc.reason)
		})
	}
}

func TestCheckMemoryLimitRatio(t *testing.T) {
	t.Parallel()
	for _, ok := range []float64{0, 0.5, 0.9, 1} {
		require.NoError(t, checkMemoryLimitRatio(ok), ok)
	}
	for _, bad := range []float64{-0.1, 1.01, 90, math.NaN(), math.Inf(1)} {
		require.ErrorContains(t, checkMemoryLimitRatio(bad), "invalid flag --memory-limit-ratio", bad)
	}
}

// Not parallel: the Go memory limit is the process's.
func TestSetMemoryLimitSetsAndRestoresTheRuntimes(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	var logs bytes.Buffer
	restore, err := setMemoryLimit(zerolog.New(&logs), 0.9, false, func() (uint64, error) { return 200 << 20, nil })
	require.NoError(t, err)
	require.Equal(t, int64(0.9*(200<<20)), debug.SetMemoryLimit(-1))
	require.Contains(t, logs.String(), `"gomemlimit":188743680,"container_limit":209715200`)
	restore()
	require.Equal(t, before, debug.SetMemoryLimit(-1))

	read := false
	restore, err = setMemoryLimit(zerolog.New(&logs), 0.9, true, func() (uint64, error) { read = true; return 1, nil })
	require.NoError(t, err)
	restore()
	require.False(t, read, "GOMEMLIMIT set: the container's limit is not even read")
	require.Equal(t, before, debug.SetMemoryLimit(-1))

	_, err = setMemoryLimit(zerolog.New(&logs), 2, false, func() (uint64, error) { return 1, nil })
	require.ErrorContains(t, err, "--memory-limit-ratio")
	require.Equal(t, before, debug.SetMemoryLimit(-1))
}
