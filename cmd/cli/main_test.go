package cli_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/personaq/personaq/integration/testenv"
)

// Every command returns with nothing it started still running, except
// watermill's router watcher: a runtime stopped while a handler still held
// its message past the drain timeout (a persona stuck in a test) leaves it
// waiting for that handler a little longer than Run does.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(testenv.NATSClientLeaks,
		goleak.IgnoreAnyFunction("github.com/ThreeDotsLabs/watermill/message.(*Router).watchAllHandlersStopped.func1"))...)
}
