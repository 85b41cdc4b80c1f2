package advisory

import "time"

// captureRetryDelay is how long a failed capture waits before its
// advisory comes back: first doubled on every failure, capped at
// maxCaptureRetry.
func captureRetryDelay(first time.Duration, failures uint64) time.Duration {
	d := first
	for n := uint64(1); n < failures && d < maxCaptureRetry; n++ {
		d *= 2
	}
	return min(d, maxCaptureRetry)
}

// maxCaptureRetry caps the delay between two tries of a failing capture.
const maxCaptureRetry = 5 * time.Minute
