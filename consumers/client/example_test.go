package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// exampleJetStream starts an in-process JetStream server and a replica
// serving a "planner" persona that is overloaded on its first attempt and
// a "reviewer" persona that always rejects its input.
func exampleJetStream() (jetstream.JetStream, func()) {
	dir, _ := os.MkdirTemp("", "personaq-client-example")
	ns, _ := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true})
	ns.Start()
	ns.ReadyForConnections(5 * time.Second)
	nc, _ := nats.Connect(ns.ClientURL())
	js, _ := jetstream.New(nc)
	planner := handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		if req.Attempt == 1 {
			return handlers.Result{}, handlers.Retryable(errors.New("model overloaded"))
		}
		return handlers.Result{Output: []byte(`{"plan":["write the test","make it pass"]}`)}, nil
	})
	reviewer := handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{}, handlers.Terminal(errors.New("the diff does not apply"))
	})
	policy := retry.Policy{Name: "quick", MaxAttempts: 3, AttemptTimeout: time.Second, Schedule: retry.Linear{Step: 20 * time.Millisecond}}
	rt, _ := consumers.New(consumers.Config{WithoutLedger: true, JetStream: js, Personas: []consumers.Persona{
		{Name: "planner", Handler: planner, Policy: policy}, {Name: "reviewer", Handler: reviewer, Policy: policy},
	}})
	_ = rt.Provision(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = rt.Run(ctx); close(done) }()
	return js, func() { cancel(); <-done; nc.Close(); ns.Shutdown(); os.RemoveAll(dir) }
}

// An orchestrator's persona-request step: submit, wait under the step
// budget, get the persona's output.
func ExampleClient_Run() {
	js, stop := exampleJetStream()
	defer stop()
	c, _ := client.New(client.Config{JetStream: js})

	req := schemas.NewRequest("story-42", "plan", "planner")
	res, err := c.Run(context.Background(), req, client.OnAttempt(func(ev *schemas.AttemptEvent) {
		if ev.Kind == schemas.AttemptFailed {
			fmt.Printf("attempt %d failed (%s), retry %d in %dms\n", ev.Attempt, ev.Class, ev.NextAttempt, ev.NextDelayMs)
		}
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s after %d attempts: %s\n", res.Record.Outcome, res.Record.Attempts, res.Output)
	// Output:
	// attempt 1 failed (retryable), retry 2 in 20ms
	// succeeded after 2 attempts: {"plan":["write the test","make it pass"]}
}

// A request that cannot succeed ends as a *StoppedError saying the task is
// blocked, with the quarantine record that keeps it.
func ExampleClient_Run_blocked() {
	js, stop := exampleJetStream()
	defer stop()
	c, _ := client.New(client.Config{JetStream: js})

	_, err := c.Run(context.Background(), schemas.NewRequest("story-43", "review", "reviewer"))
	var stopped *client.StoppedError
	if errors.As(err, &stopped) && errors.Is(err, client.ErrBlocked) {
		fmt.Println("blocked:", stopped.Record.Reason, "quarantine seq", stopped.Record.QuarantineSeq)
	}
	// Output: blocked: terminal quarantine seq 1
}

// Await works for a request submitted earlier, even one that has already
// ended (say, before the orchestrator restarted).
func ExampleClient_Await() {
	js, stop := exampleJetStream()
	defer stop()
	c, _ := client.New(client.Config{JetStream: js})

	req := schemas.NewRequest("story-44", "plan", "planner")
	if _, err := c.Submit(context.Background(), req); err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Await(ctx, req.RequestID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(res.Output))
	// Output: {"plan":["write the test","make it pass"]}
}
