package console_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Every test returns with nothing it started still running — the
// console's live streams, replay jobs and the runtimes behind the browser
// tests — once the shared Chromium is stopped. Nothing is ignored: no test
// here stores a payload or output large enough for the object store, whose
// Put can leave nats.go's watcher behind (testenv.NATSClientLeaks).
func TestMain(m *testing.M) {
	code := m.Run()
	stopBrowser()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
