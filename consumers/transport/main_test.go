package transport_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test returns with nothing it started still running: the
// subscriber's pull loops, heartbeats and settle goroutines, the
// publisher's async acks.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
