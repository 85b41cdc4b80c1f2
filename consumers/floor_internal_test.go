package consumers

import (
	"testing"

	"github.com/personaq/personaq/integration/floor"
)

// The floor loop (integration/floor) is the least work of the runtime's
// durability contract only while it batches and frees worker slots as the
// runtime does: its bounds are the runtime's.
func TestFloorKeepsTheRuntimeBounds(t *testing.T) {
	for _, c := range []struct {
		name           string
		floor, runtime int
	}{
		{"requests finishing per worker slot", floor.FinishingPerWorker, finishingPerSlot},
		{"records per batch, at most", floor.BatchMax, batchMax},
		{"records per batch, at least", floor.BatchMin, batchMinSize},
	} {
		if c.floor != c.runtime {
			t.Errorf("%s: the floor keeps %d, the runtime %d", c.name, c.floor, c.runtime)
		}
	}
}
