package client_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
)

// readmeGoBlock is the README's Go orchestrator loop, marked for this test.
var readmeGoBlock = regexp.MustCompile("(?s)<!-- readme-test: go -->\n```go\n(.*?)```")

// readmeProgram wraps the README's block in a main package.
const readmeProgram = `package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/schemas"
)

func main() {
	ctx := context.Background()
%s}
`

// TestReadmeGoLoopRuns builds the README's Go loop as a program and runs it
// against a live server serving the echo persona, as a reader would.
func TestReadmeGoLoopRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	m := readmeGoBlock.FindSubmatch(raw)
	require.NotNil(t, m, "README.md lost its Go orchestrator loop (<!-- readme-test: go -->)")

	// Inside the module, so the program imports this checkout; testdata is
	// outside ./... patterns.
	dir, err := os.MkdirTemp("testdata", "readme-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(strings.Replace(readmeProgram, "%s", string(m[1]), 1)), 0o644))

	url := readmeServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./"+filepath.ToSlash(dir))
	cmd.Env = append(os.Environ(), "NATS_URL="+url)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), `"persona":"echo"`, "the loop prints the persona's answer")
}

// readmeServer starts JetStream and a replica serving the demo echo persona.
func readmeServer(t *testing.T) string {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true})
	require.NoError(t, err)
	ns.Start()
	require.True(t, ns.ReadyForConnections(10*time.Second))
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	policy := retry.Policy{Name: "quick", MaxAttempts: 2, AttemptTimeout: 5 * time.Second, Schedule: retry.Linear{Step: 10 * time.Millisecond}}
	rt, err := consumers.New(consumers.Config{WithoutLedger: true, JetStream: js, Personas: []consumers.Persona{
		{Name: "echo", Handler: handlers.DemoPersonas()["echo"], Policy: policy},
	}})
	require.NoError(t, err)
	require.NoError(t, rt.Provision(context.Background()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = rt.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ns.ClientURL()
}
