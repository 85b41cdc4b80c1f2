package floor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/integration/floor"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

const persona = "coder"

// setup provisions the runtime's streams and persona consumer and
// publishes n requests; it returns their bodies, in order.
func setup(t *testing.T, js jetstream.JetStream, topo wire.Topology, n int) [][]byte {
	t.Helper()
	ctx := context.Background()
	spec := consumers.ConsumerSpec{Persona: persona, AckWait: 30 * time.Second, MaxAckPending: 64}
	if err := consumers.Provision(ctx, js, topo, []consumers.ConsumerSpec{spec}); err != nil {
		t.Fatal(err)
	}
	bodies := make([][]byte, n)
	for i := range bodies {
		req := schemas.NewRequest(fmt.Sprintf("task-%03d", i), "implement", persona)
		req.Input = []byte(`{"prompt":"p"}`)
		data, err := schemas.Encode(req)
		if err != nil {
			t.Fatal(err)
		}
		m := &nats.Msg{Subject: topo.RequestSubject(persona), Data: data, Header: nats.Header{}}
		m.Header.Set(jetstream.MsgIDHeader, req.RequestID)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
		bodies[i] = data
	}
	return bodies
}

// unsettledComes waits up to 5 s for the unsettled requests to number
// want and returns the last count: a plain ack is not confirmed, so
// Settled can run before the server has applied it.
func unsettledComes(js jetstream.JetStream, topo wire.Topology, want uint64) (uint64, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		left, err := consumers.Unsettled(context.Background(), js, topo)
		if (err == nil && left == want) || time.Now().After(deadline) {
			return left, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settledAll collects Settled calls until want arrive.
type settledAll struct {
	mu   sync.Mutex
	errs map[string]error
	want int
	done chan struct{}
}

func newSettled(want int) *settledAll {
	return &settledAll{errs: map[string]error{}, want: want, done: make(chan struct{})}
}

func (s *settledAll) settled(id string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, seen := s.errs[id]; seen {
		return
	}
	s.errs[id] = err
	if len(s.errs) == s.want {
		close(s.done)
	}
}

func (s *settledAll) wait(t *testing.T) map[string]error {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("settled %d of %d", len(s.errs), s.want)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errs
}

func streamMsgs(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// TestLoopWritesWhatTheContractAsks: every request gets its terminal
// record (and its started event, its ledger success) before its ack, and
// the consumer ends with nothing unsettled.
func TestLoopWritesWhatTheContractAsks(t *testing.T) {
	for _, tc := range []struct {
		name           string
		events, ledger bool
		withoutFinish  bool
		probe          bool
	}{
		{"record", false, false, false, false},
		{"events", true, false, false, false},
		{"events_ledger", true, true, false, false},
		{"events_ledger_without_finish", true, true, true, false},
		{"events_redis_probe", true, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testenv.StartNATS(t)
			js := n.JetStream(t)
			topo := wire.Topology{}.WithDefaults()
			const count = 40
			bodies := setup(t, js, topo, count)
			reqs, err := floor.Prepare(topo, persona, bodies, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			var led *ledger.Ledger
			if tc.ledger {
				led, err = ledger.New(ledger.Config{Client: testenv.StartRedis(t).Client(t), Prefix: "floor"})
				if err != nil {
					t.Fatal(err)
				}
			}
			var probe redis.UniversalClient
			if tc.probe {
				probe = testenv.StartRedis(t).Client(t)
			}
			s := newSettled(count)
			l, err := floor.Start(context.Background(), floor.Config{
				JetStream: n.JetStream(t), Topology: topo, Persona: persona, Workers: 8,
				Events: tc.events, Ledger: led, WithoutFinish: tc.withoutFinish, RedisProbe: probe, Settled: s.settled,
			}, reqs)
			if err != nil {
				t.Fatal(err)
			}
			errs := s.wait(t)
			l.Stop()
			for id, err := range errs {
				if err != nil {
					t.Errorf("request %s: %v", id, err)
				}
			}
			if got := streamMsgs(t, js, topo.OutcomesStream); got != count {
				t.Errorf("terminal records: %d, want %d", got, count)
			}
			wantEvents := uint64(0)
			if tc.events {
				wantEvents = count
			}
			if got := streamMsgs(t, js, topo.AttemptsStream); got != wantEvents {
				t.Errorf("attempt events: %d, want %d", got, wantEvents)
			}
			if left, err := unsettledComes(js, topo, 0); err != nil || left != 0 {
				t.Errorf("unsettled requests: %d (%v), want 0", left, err)
			}
			if probe != nil {
				probeWrote(t, probe, count)
			}
			if led != nil {
				req, err := schemas.DecodeRequest(bodies[0])
				if err != nil {
					t.Fatal(err)
				}
				bg, err := led.Begin(context.Background(), ledger.StepKey{TaskID: req.TaskID, Step: req.Step + "@" + req.RequestID}, req.RequestID, ledger.WithLease(time.Minute))
				switch {
				case err != nil:
					t.Errorf("ledger after the loop: %v", err)
				case tc.withoutFinish && !(bg.Busy && bg.BusyAttempt == 1):
					t.Errorf("ledger after the loop without Finish: busy %v attempt %d, want attempt 1 still leased", bg.Busy, bg.BusyAttempt)
				case !tc.withoutFinish && !bg.Done:
					t.Errorf("ledger after the loop: done %v, want the step done", bg.Done)
				}
			}
		})
	}
}

// probeWrote checks that the probe sent one SET and one DEL per request
// and left no key behind.
func probeWrote(t *testing.T, c redis.UniversalClient, want int) {
	t.Helper()
	ctx := context.Background()
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"set", "del"} {
		if line := fmt.Sprintf("cmdstat_%s:calls=%d,", cmd, want); !strings.Contains(stats, line) {
			t.Errorf("commandstats lack %q:\n%s", line, stats)
		}
	}
	if keys, err := c.DBSize(ctx).Result(); err != nil || keys != 0 {
		t.Errorf("keys left: %d (%v), want 0", keys, err)
	}
}

// TestStartRefusesProbeAndLedger: the probe stands in for a ledger, not
// beside one.
func TestStartRefusesProbeAndLedger(t *testing.T) {
	n := testenv.StartNATS(t)
	js := n.JetStream(t)
	topo := wire.Topology{}.WithDefaults()
	setup(t, js, topo, 0) // the consumer exists: only the config can be refused
	c := testenv.StartRedis(t).Client(t)
	led, err := ledger.New(ledger.Config{Client: c, Prefix: "floor"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := floor.Start(context.Background(), floor.Config{JetStream: js, Topology: topo, Persona: persona, Workers: 1, Ledger: led, RedisProbe: c}, nil)
	if err == nil {
		l.Stop()
	}
	if !errors.Is(err, floor.ErrProbeWithLedger) {
		t.Fatalf("Start with RedisProbe and Ledger: %v, want ErrProbeWithLedger", err)
	}
}

// TestLoopRefusesAnUnpreparedRequest: a request Prepare was not given is
// reported, not acked.
func TestLoopRefusesAnUnpreparedRequest(t *testing.T) {
	n := testenv.StartNATS(t)
	js := n.JetStream(t)
	topo := wire.Topology{}.WithDefaults()
	bodies := setup(t, js, topo, 2)
	reqs, err := floor.Prepare(topo, persona, bodies[:1], time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := newSettled(2)
	l, err := floor.Start(context.Background(), floor.Config{JetStream: n.JetStream(t), Topology: topo, Persona: persona, Workers: 2, Settled: s.settled}, reqs)
	if err != nil {
		t.Fatal(err)
	}
	errs := s.wait(t)
	l.Stop()
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			if !errors.Is(err, floor.ErrUnprepared) {
				t.Errorf("error %v, want ErrUnprepared", err)
			}
		}
	}
	if failed != 1 {
		t.Errorf("%d requests failed, want 1", failed)
	}
	if left, err := unsettledComes(js, topo, 1); err != nil || left != 1 {
		t.Errorf("unsettled requests: %d (%v), want the unprepared one", left, err)
	}
}

// TestStartRefusesNoWorkers names the field.
func TestStartRefusesNoWorkers(t *testing.T) {
	n := testenv.StartNATS(t)
	js := n.JetStream(t)
	topo := wire.Topology{}.WithDefaults()
	setup(t, js, topo, 0) // the consumer exists: only the config can be refused
	l, err := floor.Start(context.Background(), floor.Config{JetStream: js, Topology: topo, Persona: persona}, nil)
	if err == nil {
		l.Stop()
		t.Fatal("Start with no workers: no error")
	}
	if !strings.Contains(err.Error(), "workers") {
		t.Errorf("Start with no workers: %v, want the field named", err)
	}
}
