package tracing_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test returns with nothing it started still running: the shutdown
// Setup returns stops the span processor's export goroutine.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
