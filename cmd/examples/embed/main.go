// Command embed shows personaq's Go API: register a consumers.HandlerFunc per
// persona and run the same runtime `personaq serve` runs, from your own main.
//
//	NATS_URL=nats://127.0.0.1:4222 REDIS_URL=redis://127.0.0.1:6379/0 go run ./cmd/examples/embed
//
// then: personaq publish --persona summarizer --task t1 --input '{"text":"…"}'
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := zerolog.New(os.Stderr).With().Timestamp().Logger()

	nc, err := nats.Connect(envOr("NATS_URL", nats.DefaultURL))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	client, err := ledger.NewClientURL(envOr("REDIS_URL", "redis://127.0.0.1:6379/0"))
	if err != nil {
		return err
	}
	led, err := ledger.New(ledger.Config{Client: client})
	if err != nil {
		return err
	}

	rt, err := consumers.New(consumers.Config{
		JetStream: js, Ledger: led, Logger: &log,
		Personas: []consumers.Persona{{
			Name:    "summarizer",
			Handler: consumers.HandlerFunc(summarize),
			// The persona request step: 3 retries, linear 30s/60s/90s, 60s per attempt.
			Policy:      retry.PersonaPolicy(60 * time.Second),
			Concurrency: 8,
		}},
	})
	if err != nil {
		return err
	}
	return rt.Run(ctx)
}

// summarize is a persona handler: classify failures with the handlers
// constructors; feedback from earlier attempts arrives in req.Feedback.
func summarize(ctx context.Context, req *consumers.Request) (consumers.Result, error) {
	var in struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(req.Message.Input, &in); err != nil || in.Text == "" {
		return consumers.Result{}, handlers.Terminal(errors.New("input.text is required"))
	}
	if err := ctx.Err(); err != nil {
		return consumers.Result{}, err
	}
	out, _ := json.Marshal(map[string]string{"summary": firstWords(in.Text, 12)})
	return consumers.Result{Output: out}, nil
}

func firstWords(s string, n int) string {
	words := 0
	for i, r := range s {
		if r == ' ' {
			if words++; words == n {
				return s[:i] + "…"
			}
		}
	}
	return s
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
