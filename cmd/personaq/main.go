// Command personaq runs persona requests on NATS JetStream with explicit,
// bounded retries. See `personaq --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/personaq/personaq/cmd/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
