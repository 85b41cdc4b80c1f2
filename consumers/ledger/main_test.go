package ledger_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// After a node was killed, go-redis probes it from a goroutine that
		// sleeps 1s between dials and returns once its closed client's pool
		// notices: it outlives Close by up to a second, then ends.
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
	)
}
