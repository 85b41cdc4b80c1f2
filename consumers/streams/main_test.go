package streams_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/personaq/personaq/integration/testenv"
)

// Every test returns with nothing it started still running: the in-process
// nats-server and the client connections close with the test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.NATSClientLeaks...) }
