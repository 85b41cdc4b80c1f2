package client_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/personaq/personaq/integration/testenv"
)

// Every test returns with nothing it started still running (Await's
// subscriptions, OnAttempt's follower, the replicas the tests run), except
// what nats.go itself can leave behind: the tests' replicas store outputs
// over 64 KiB with the object store's Put (TestOutputRoundTrip, up to 8 MiB),
// whose async-publish watcher may outlive it (testenv.NATSClientLeaks).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.NATSClientLeaks...)
}
