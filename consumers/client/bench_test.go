package client_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// BenchmarkSubmitAwait measures one orchestrator round trip — submit a
// request to a no-op persona and get its answer back — one at a time, b.N
// times, on one in-process server (file storage, sync always) with a real
// Redis ledger, against a raw JetStream request-reply on the same server in
// the same run: the request published to a work-queue stream (PubAck), a
// Consume loop that acks it and publishes the reply on the requester's
// inbox. Reported: p50/p99 of each and their ratio.
//
//	go test -run='^$' -bench='^BenchmarkSubmitAwait$' -benchtime=500x -count=3 ./consumers/client/
func BenchmarkSubmitAwait(b *testing.B) {
	e := newBenchEnv(b)
	raw := benchRawRequestReply(b, e, b.N)
	run, submit := benchPersonaq(b, e, b.N)
	b.ReportMetric(ms(percentile(raw, .50)), "raw_p50_ms")
	b.ReportMetric(ms(percentile(raw, .99)), "raw_p99_ms")
	b.ReportMetric(ms(percentile(run, .50)), "run_p50_ms")
	b.ReportMetric(ms(percentile(run, .99)), "run_p99_ms")
	b.ReportMetric(ms(percentile(submit, .50)), "submit_await_p50_ms")
	b.ReportMetric(ms(percentile(submit, .99)), "submit_await_p99_ms")
	b.ReportMetric(percentile(run, .50).Seconds()/percentile(raw, .50).Seconds(), "run_vs_raw_p50")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func percentile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

// newBenchEnv is newEnv for a benchmark: in-process NATS and a real Redis.
func newBenchEnv(b *testing.B) *env {
	b.Helper()
	e := newEnv(b, true)
	e.log = zerolog.Nop()
	c, err := client.New(client.Config{JetStream: e.js})
	if err != nil {
		b.Fatal(err)
	}
	e.c = c
	return e
}

func benchRawRequestReply(b *testing.B, e *env, n int) []time.Duration {
	b.Helper()
	ctx := context.Background()
	_, err := e.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "RAWRR", Subjects: []string{"rawrr.>"}, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		b.Fatal(err)
	}
	cons, err := e.js.CreateOrUpdateConsumer(ctx, "RAWRR", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		b.Fatal(err)
	}
	nc := e.js.Conn()
	cc, err := cons.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		_ = nc.Publish(m.Headers().Get("Reply-To"), []byte(`{"ok":true}`))
	})
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	out := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		m := nats.NewMsg("rawrr.work")
		m.Header.Set("Reply-To", inbox)
		m.Data = []byte(`{"prompt":"x"}`)
		if _, err := e.js.PublishMsg(ctx, m); err != nil {
			b.Fatal(err)
		}
		if _, err := sub.NextMsg(10 * time.Second); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(t0))
	}
	return out
}

func benchPersonaq(b *testing.B, e *env, n int) (run, submitAwait []time.Duration) {
	b.Helper()
	e.serve(consumers.Config{}, consumers.Persona{Name: "noop", Handler: handlers.Func(
		func(context.Context, *handlers.Request) (handlers.Result, error) {
			return handlers.Result{Output: []byte(`{"ok":true}`)}, nil
		}), Policy: policy(3, 10*time.Second)})
	ctx := context.Background()
	for range n { // interleaved, so neither pays for warming up
		t0 := time.Now()
		if _, err := e.c.Run(ctx, schemas.NewRequest("bench", "main", "noop")); err != nil {
			b.Fatal(err)
		}
		run = append(run, time.Since(t0))
		t0 = time.Now()
		req := schemas.NewRequest("bench", "main", "noop")
		if _, err := e.c.Submit(ctx, req, client.SkipPersonaCheck()); err != nil {
			b.Fatal(err)
		}
		if _, err := e.c.Await(ctx, req.RequestID); err != nil {
			b.Fatal(err)
		}
		submitAwait = append(submitAwait, time.Since(t0))
	}
	return run, submitAwait
}
