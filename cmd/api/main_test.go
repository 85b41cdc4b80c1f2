package api_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/personaq/personaq/integration/testenv"
)

// Every test returns with nothing it started still running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.NATSClientLeaks...) }
