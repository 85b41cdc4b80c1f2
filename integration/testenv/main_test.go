package testenv

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test returns with nothing it started still running: the goroutine
// that waits for a redis-server process ends when the process is stopped.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, NATSClientLeaks...) }
