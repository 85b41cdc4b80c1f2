package cli

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
)

// defaultMemoryLimitRatio is the share of a container's memory limit given
// to the Go runtime as its soft limit: the rest is for what the Go heap
// does not count (the binary, thread stacks outside Go, cgo) and for the
// collector to overshoot briefly.
const defaultMemoryLimitRatio = 0.9

// memoryLimitFlag adds --memory-limit-ratio to a long-running command.
func memoryLimitFlag(fs *pflag.FlagSet, ratio *float64) {
	fs.Float64Var(ratio, "memory-limit-ratio", defaultMemoryLimitRatio,
		"in a container with a memory limit, set the Go soft memory limit to this fraction of it (0: off; GOMEMLIMIT, when set, wins)")
}

// memoryLimit is what applyMemoryLimit decided: the soft memory limit to
// set (0: leave the runtime's as it is) and why, for the start log.
type memoryLimit struct {
	limit     int64
	container uint64 // the container's limit, when one was read
	reason    string
}

// decideMemoryLimit is the pure part of applyMemoryLimit. At GOGC=100 the
// heap grows to about twice what is live before the collector runs, so a
// replica holding many slow requests can reach a container's limit and be
// killed while half its heap is garbage; a soft limit under the
// container's makes the collector run earlier instead. An explicit
// GOMEMLIMIT is the operator's choice and is left alone.
func decideMemoryLimit(ratio float64, gomemlimitSet bool, container uint64, readErr error) memoryLimit {
	switch {
	case ratio == 0:
		return memoryLimit{reason: "off (--memory-limit-ratio 0)"}
	case gomemlimitSet:
		return memoryLimit{reason: "GOMEMLIMIT is set"}
	case errors.Is(readErr, memlimit.ErrNoLimit):
		return memoryLimit{reason: "no container memory limit"}
	case readErr != nil:
		return memoryLimit{reason: "container memory limit unreadable: " + readErr.Error()}
	}
	return memoryLimit{limit: int64(float64(container) * ratio), container: container, reason: "container memory limit"}
}

// checkMemoryLimitRatio fails fast on a ratio that is not a fraction.
func checkMemoryLimitRatio(ratio float64) error {
	if ratio < 0 || ratio > 1 || math.IsNaN(ratio) {
		return fmt.Errorf("invalid flag --memory-limit-ratio: %v: want a fraction in (0, 1], or 0 for off", ratio)
	}
	return nil
}

// applyMemoryLimit sets the Go runtime's soft memory limit from the
// container's (cgroup v1 or v2) and logs what it decided; restore puts the
// previous limit back (for commands run in-process, as the tests do).
func applyMemoryLimit(log zerolog.Logger, ratio float64) (restore func(), err error) {
	_, envSet := os.LookupEnv("GOMEMLIMIT")
	return setMemoryLimit(log, ratio, envSet, memlimit.FromCgroup)
}

// setMemoryLimit is applyMemoryLimit with the container's limit read by
// readLimit (memlimit.FromCgroup, or a test's).
func setMemoryLimit(log zerolog.Logger, ratio float64, envSet bool, readLimit func() (uint64, error)) (restore func(), err error) {
	if err := checkMemoryLimitRatio(ratio); err != nil {
		return nil, err
	}
	var container uint64
	var readErr error
	if ratio > 0 && !envSet {
		container, readErr = readLimit()
	}
	d := decideMemoryLimit(ratio, envSet, container, readErr)
	if d.limit == 0 {
		log.Debug().Str("reason", d.reason).Int64("gomemlimit", debug.SetMemoryLimit(-1)).Msg("Go memory limit left as it is")
		return func() {}, nil
	}
	prev := debug.SetMemoryLimit(d.limit)
	log.Info().Int64("gomemlimit", d.limit).Uint64("container_limit", d.container).Float64("ratio", ratio).
		Msg("Go memory limit set from the container's")
	return func() { debug.SetMemoryLimit(prev) }, nil
}
