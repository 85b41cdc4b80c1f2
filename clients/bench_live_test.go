package clients_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/personaq/personaq/integration/testenv"
)

// TestPythonLiveOutputLatency runs clients/python/bench_live.py against a
// live personaq with the streaming personas: how long a live output chunk
// takes from the persona's write to the Python iterator's caller. A
// benchmark, not a check: it runs only with PERSONAQ_BENCH=1.
//
//	PERSONAQ_BENCH=1 go test -run TestPythonLiveOutputLatency -v ./clients/
func TestPythonLiveOutputLatency(t *testing.T) {
	if os.Getenv("PERSONAQ_BENCH") != "1" {
		t.Skip("a benchmark: set PERSONAQ_BENCH=1 to run it")
	}
	python := pyInterpreter(t)
	rs := testenv.StartRedis(t)
	bin := buildPersonaq(t)
	dev := pyStartDev(t, bin, "redis://"+rs.Addr+"/0")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	gates := startStreamReplica(ctx, t, bin, dev.natsURL, dev.apiURL, pyToken)
	cmd := exec.CommandContext(ctx, python, filepath.Join("python", "bench_live.py"))
	cmd.Env = append(os.Environ(), "PERSONAQ_URL="+dev.apiURL, "PERSONAQ_API_TOKEN="+pyToken,
		"PERSONAQ_STREAM_GATES="+gates, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bench_live.py: %v\n%s", err, out)
	}
	t.Logf("\n%s", out)
}
