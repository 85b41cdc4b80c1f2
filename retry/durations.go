package retry

import (
	"math"
	"time"
)

// maxDuration is the largest time.Duration; budget arithmetic saturates at
// it instead of wrapping to a negative deadline.
const maxDuration = time.Duration(math.MaxInt64)

// addDuration returns a+b for non-negative a and b, saturating.
func addDuration(a, b time.Duration) time.Duration {
	if a > maxDuration-b {
		return maxDuration
	}
	return a + b
}

// scaleDuration returns d×f for non-negative d and f, saturating; a NaN or
// negative f yields 0.
func scaleDuration(d time.Duration, f float64) time.Duration {
	v := float64(d) * f
	switch {
	case !(v > 0):
		return 0
	case v >= float64(maxDuration):
		return maxDuration
	}
	return time.Duration(v)
}

// mulDuration returns d×n for non-negative d, saturating; n ≤ 0 yields 0.
func mulDuration(d time.Duration, n int) time.Duration {
	switch {
	case n <= 0 || d <= 0:
		return 0
	case d > maxDuration/time.Duration(n):
		return maxDuration
	}
	return d * time.Duration(n)
}
