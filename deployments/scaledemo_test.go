package deployments_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScaleDemoNamesAMissingImage: scale-demo.sh stops before starting
// anything when an image the cluster needs is not on the host, naming the
// image and the command that builds it (docker-compose used to fail with
// "invalid container name or ID: value is empty"). Without a reachable
// docker engine it says that instead. Either way it exits 1 and runs no
// docker-compose command.
func TestScaleDemoNamesAMissingImage(t *testing.T) {
	t.Parallel()
	const missing = "personaq/never-built-by-anyone:none"
	cmd := exec.Command("bash", filepath.Join("compose", "scale-demo.sh"), "1")
	cmd.Env = append(cmd.Environ(), "PERSONAQ_IMAGE="+missing, "COMPOSE_PROJECT_NAME=pq-scaledemo-test")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "stdout: %s\nstderr: %s", &stdout, &stderr)
	require.Equal(t, 1, exit.ExitCode())
	require.Empty(t, stdout.String(), "nothing started: no command printed")
	if strings.Contains(stderr.String(), "docker engine is not reachable") {
		t.Logf("no docker engine here; the script said so: %s", &stderr)
		return
	}
	require.Contains(t, stderr.String(), "image(s) not on this host (nothing is pulled)")
	require.Contains(t, stderr.String(), missing+": build it with `bash integration/images/build.sh`")
	require.NotContains(t, stderr.String(), "value is empty")
}

// TestScaleDemoRefusesAnUnknownKill: KILL_NODE takes only "leader"; any
// other value fails before anything starts, naming the variable.
func TestScaleDemoRefusesAnUnknownKill(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("bash", filepath.Join("compose", "scale-demo.sh"), "1")
	cmd.Env = append(cmd.Environ(), "KILL_NODE=nats2", "COMPOSE_PROJECT_NAME=pq-scaledemo-kill-test")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "stdout: %s\nstderr: %s", &stdout, &stderr)
	require.Equal(t, 2, exit.ExitCode())
	require.Empty(t, stdout.String(), "nothing started")
	require.Contains(t, stderr.String(), "KILL_NODE must be empty or 'leader', not 'nats2'")
}
