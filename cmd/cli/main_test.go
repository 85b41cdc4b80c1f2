package cli_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every command returns with nothing it started still running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
