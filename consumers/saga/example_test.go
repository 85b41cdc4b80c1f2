package saga_test

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
	"github.com/personaq/personaq/consumers/saga"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Undo what a failed saga left behind: publish its compensations, then run
// them. A handler that fails for good leaves its saga QUARANTINED with a
// compensation_failed record; the others are COMPENSATED.
func Example() {
	dir, _ := os.MkdirTemp("", "personaq-saga-example")
	defer os.RemoveAll(dir)
	ns, _ := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true})
	ns.Start()
	defer ns.Shutdown()
	ns.ReadyForConnections(5 * time.Second)
	nc, _ := nats.Connect(ns.ClientURL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	topo := consumers.Topology{}.WithDefaults()
	_ = consumers.Provision(ctx, js, topo, nil) // the quarantine stream

	deleteBranch := func(_ context.Context, req *schemas.CompensationRequest) error {
		if req.Target == "main" {
			return handlers.Terminal(errors.New("protected branch"))
		}
		return nil
	}
	for _, target := range []string{"loop/42", "main"} {
		req := &schemas.CompensationRequest{SchemaVersion: schemas.Version, RequestID: "req-" + target, SagaID: "saga-" + target,
			Kind: schemas.CompensationDeleteBranch, Target: target, CreatedAt: time.Now().UTC()}
		if _, _, err := saga.Publish(ctx, js, saga.Topology{}, req); err != nil {
			fmt.Println(err)
			return
		}
	}
	r, err := saga.NewRunner(saga.Config{JetStream: js, Writer: dlq.NewWriter(js, topo.QuarantineSubject),
		Handlers: map[schemas.CompensationKind]saga.Func{schemas.CompensationDeleteBranch: deleteBranch},
		Policy:   retry.LocalPolicy()})
	if err != nil {
		fmt.Println(err)
		return
	}
	rep, err := r.Sweep(ctx, time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("compensated:", rep.Recovered)
	fmt.Println("failed:", rep.Errors)
	// Output:
	// compensated: [saga-loop/42]
	// failed: [saga saga-main: branch deletion failed for DELETE_BRANCH main: protected branch]
}
