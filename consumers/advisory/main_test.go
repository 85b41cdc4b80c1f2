package advisory_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/personaq/personaq/integration/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.NATSClientLeaks...)
}
