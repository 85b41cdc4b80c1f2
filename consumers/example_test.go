package consumers_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Run a persona handler on JetStream from your own program: register a
// handlers.Func per persona, publish a request, read its outcome.
func Example() {
	dir, _ := os.MkdirTemp("", "personaq-example")
	defer os.RemoveAll(dir)
	ns, _ := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true})
	ns.Start()
	defer ns.Shutdown()
	ns.ReadyForConnections(5 * time.Second)
	nc, _ := nats.Connect(ns.ClientURL())
	defer nc.Close()
	js, _ := jetstream.New(nc)

	greet := handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		if req.Attempt == 1 {
			return handlers.Result{}, handlers.Retryable(fmt.Errorf("model overloaded"))
		}
		return handlers.Result{Output: []byte(`"hello"`)}, nil
	})
	policy := retry.Policy{Name: "quick", MaxAttempts: 3, AttemptTimeout: time.Second,
		Schedule: retry.Linear{Step: 20 * time.Millisecond}}
	rt, err := consumers.New(consumers.Config{WithoutLedger: true, JetStream: js,
		Personas: []consumers.Persona{{Name: "greeter", Handler: greet, Policy: policy}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = rt.Provision(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = rt.Run(ctx); close(done) }()

	req := schemas.NewRequest("task-1", "main", "greeter")
	_, _ = wire.PublishRequest(context.Background(), js, wire.Topology{}, req)
	ev := waitForOutcome(js, req.RequestID)
	fmt.Printf("%s after %d attempts\n", ev.Outcome, ev.Attempts)
	cancel()
	<-done
	// Output: succeeded after 2 attempts
}

func waitForOutcome(js jetstream.JetStream, id string) *schemas.OutcomeEvent {
	cons, _ := js.OrderedConsumer(context.Background(), "PERSONAQ_OUTCOMES", jetstream.OrderedConsumerConfig{})
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			return &schemas.OutcomeEvent{Outcome: "timeout"}
		}
		if ev, err := schemas.DecodeOutcome(m.Data()); err == nil && ev.RequestID == id {
			return ev
		}
	}
}
