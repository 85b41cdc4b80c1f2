package consumers_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/personaq/personaq/integration/testenv"
)

// Every test leaves no goroutine behind: a runtime, subscriber or client
// that is closed stops everything it started.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.NATSClientLeaks...) }
