package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// idle provisions the streams with a persona that is never sent work.
func (e *env) idle() {
	e.serve(consumers.Config{}, consumers.Persona{Name: "idle", Handler: handlers.Func(
		func(context.Context, *handlers.Request) (handlers.Result, error) { return handlers.Result{}, nil }),
		Policy: policy(1, time.Second)})
}

func record(t *testing.T, id string, outcome schemas.Outcome) *nats.Msg {
	t.Helper()
	data, err := json.Marshal(&schemas.OutcomeEvent{SchemaVersion: schemas.Version, RequestID: id, TaskID: "t", Step: "s",
		Persona: "idle", Outcome: outcome, At: time.Now().UTC()})
	require.NoError(t, err)
	topo := wire.Topology{}.WithDefaults()
	return &nats.Msg{Subject: topo.OutcomeSubject(string(outcome), "idle", id), Data: data}
}

// A create-once write the stream refuses still reaches core subscribers;
// Await answers with the record the stream holds, never the refused one.
func TestAwaitIgnoresARecordTheStreamRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.idle()
	const id = "refused-write"
	filter := wire.Topology{}.WithDefaults().OutcomeFilter(id)
	type answer struct {
		res *client.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := e.c.Await(context.Background(), id)
		done <- answer{res, err}
	}()
	// The refused write (an expectation no stream state meets), sent for a
	// second so that the Await's subscription sees it.
	ctx := context.Background()
	for range 50 {
		_, err := e.js.PublishMsg(ctx, record(t, id, schemas.OutcomeSucceeded), jetstream.WithExpectLastSequenceForSubject(99, filter))
		require.Error(t, err, "the stream must refuse it")
		select {
		case a := <-done:
			t.Fatalf("Await answered with a record the stream never stored: %+v %v", a.res, a.err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	_, err := e.js.PublishMsg(ctx, record(t, id, schemas.OutcomeCancelled), jetstream.WithExpectLastSequenceForSubject(0, filter))
	require.NoError(t, err)
	select {
	case a := <-done:
		require.ErrorIs(t, a.err, client.ErrCancelled, "the stored record stands")
	case <-time.After(10 * time.Second):
		t.Fatal("Await never answered with the stored record")
	}
}

// Concurrent Awaits create no JetStream consumer: each is a core
// subscription and a lookup.
func TestConcurrentAwaitsCreateNoConsumers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.idle()
	s, err := e.js.Stream(context.Background(), wire.Topology{}.WithDefaults().OutcomesStream)
	require.NoError(t, err)
	// Consumers filtered on the awaited requests' records (the replica has
	// its own, on the cancelled records).
	awaitConsumers := func() int {
		n := 0
		for info := range s.ListConsumers(context.Background()).Info() {
			for _, f := range append([]string{info.Config.FilterSubject}, info.Config.FilterSubjects...) {
				if strings.Contains(f, "waiting-") {
					n++
				}
			}
		}
		return n
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = e.c.Await(ctx, fmt.Sprintf("waiting-%d", i))
		}()
	}
	time.Sleep(300 * time.Millisecond) // let them all wait
	require.Zero(t, awaitConsumers(), "an Await must not make a consumer on the outcomes stream")
	cancel()
	wg.Wait()
}

// A record the outcomes stream stores without the Await's subscription
// seeing it (the server delivers to core subscribers before the stream
// stores, so a write racing the subscription is seen by neither the
// subscription nor the first lookup) is still found: here the record
// reaches the stream only through a source, never on a core subject.
func TestAwaitFindsARecordItsSubscriptionMissed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.idle()
	ctx := context.Background()
	topo := wire.Topology{}.WithDefaults()
	_, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "STAGED", Subjects: []string{"staged.>"}})
	require.NoError(t, err)
	outcomes, err := e.js.Stream(ctx, topo.OutcomesStream)
	require.NoError(t, err)
	cfg := outcomes.CachedInfo().Config
	cfg.Sources = []*jetstream.StreamSource{{Name: "STAGED",
		SubjectTransforms: []jetstream.SubjectTransformConfig{{Source: "staged.>", Destination: topo.OutcomesPrefix + ".>"}}}}
	_, err = e.js.UpdateStream(ctx, cfg)
	require.NoError(t, err)

	const id = "missed-by-the-subscription"
	done := make(chan error, 1)
	go func() { _, err := e.c.Await(ctx, id); done <- err }()
	// Past the Await's first lookup (a later one would pass with or
	// without rechecks, so this wait can only hide the bug, not fake it).
	time.Sleep(300 * time.Millisecond)
	msg := record(t, id, schemas.OutcomeSucceeded)
	msg.Subject = "staged." + strings.TrimPrefix(msg.Subject, topo.OutcomesPrefix+".")
	_, err = e.js.PublishMsg(ctx, msg)
	require.NoError(t, err)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("Await never found a record its subscription did not see")
	}
}
