package streams_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/streams"
	"github.com/personaq/personaq/integration/testenv"
)

// BenchmarkPublishAtomic is one atomic batch commit of terminal-record
// sized messages, each with its create-once expectation, on a nats-server
// process of its own (file storage, R1, sync_interval always), against
// one single publish of the same message (records=alone). It splits a
// commit's cost into the server's fixed cost per batch and its cost per
// record: ms/commit is the wall time from the first message sent to the
// commit's ack, server_ms/commit the server's CPU (user + system) per
// commit, us/record both divided by the records.
//
//	go test -run='^$' -bench='^BenchmarkPublishAtomic$' -benchtime=200x ./consumers/streams/
func BenchmarkPublishAtomic(b *testing.B) {
	for _, storage := range []jetstream.StorageType{jetstream.FileStorage, jetstream.MemoryStorage} {
		for _, n := range []int{0, 4, 16, 64, 256} {
			name := fmt.Sprintf("%s/records=%d", storage, n)
			if n == 0 {
				name = storage.String() + "/records=alone"
			}
			b.Run(name, func(b *testing.B) { benchPublishAtomic(b, storage, n) })
		}
	}
}

func benchPublishAtomic(b *testing.B, storage jetstream.StorageType, n int) {
	srv := testenv.StartNATSProcess(b)
	nc := srv.Conn(b)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "OUT", Subjects: []string{"OUT.>"}, Storage: storage, AllowAtomicPublish: true,
	}); err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 400) // about a terminal record's JSON
	msgs := make([]*nats.Msg, max(n, 1))
	record := 0
	next := func() *nats.Msg {
		record++
		req := fmt.Sprintf("req-%08d", record)
		m := nats.NewMsg("OUT.succeeded.coder." + req)
		m.Data = payload
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, "OUT.*.*."+req)
		return m
	}
	cpu0 := srv.CPU()
	var wall time.Duration
	b.ResetTimer()
	for range b.N {
		for i := range msgs {
			msgs[i] = next()
		}
		start := time.Now()
		if n == 0 {
			_, err = js.PublishMsg(ctx, msgs[0])
		} else {
			_, err = streams.PublishAtomic(ctx, nc, msgs)
		}
		wall += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	server := srv.CPU() - cpu0
	per := float64(b.N)
	b.ReportMetric(float64(wall.Microseconds())/1000/per, "ms/commit")
	b.ReportMetric(float64(server.Microseconds())/1000/per, "server_ms/commit")
	records := per * float64(len(msgs))
	b.ReportMetric(float64(wall.Microseconds())/records, "us/record")
	b.ReportMetric(float64(server.Microseconds())/records, "server_us/record")
}
