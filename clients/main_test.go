package clients_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// binDir holds the personaq binary the tests of this package share.
var binDir string

// Every test returns with nothing it started still running: the goroutines
// that wait for the live personaq processes and scan their output end when
// the processes are stopped.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "personaq-clients-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "clients: temporary directory:", err)
		os.Exit(1)
	}
	binDir = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { _ = os.RemoveAll(dir) }))
}

var personaqBuild struct {
	once sync.Once
	bin  string
	err  error
}

// buildPersonaq builds ./cmd/personaq once for the whole package: the
// Python and TypeScript suites run the same binary, and a second link of
// it took as long as one of their suites on a loaded machine.
func buildPersonaq(t *testing.T) string {
	t.Helper()
	personaqBuild.once.Do(func() {
		bin := filepath.Join(binDir, "personaq")
		out, err := exec.Command("go", "build", "-o", bin, "github.com/personaq/personaq/cmd/personaq").CombinedOutput()
		if err != nil {
			personaqBuild.err = fmt.Errorf("go build ./cmd/personaq: %w\n%s", err, out)
			return
		}
		personaqBuild.bin = bin
	})
	if personaqBuild.err != nil {
		t.Fatal(personaqBuild.err)
	}
	return personaqBuild.bin
}
