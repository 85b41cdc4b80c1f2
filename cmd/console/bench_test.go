package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/console"
	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

// benchRecords is the quarantine size the page-load target is stated for.
const benchRecords = 10_000

// BenchmarkQuarantinePage measures the server time of a quarantine page
// (and the overview) over 10,000 records: handler time, no network.
//
//	go test -run='^$' -bench=QuarantinePage -benchtime=20x ./cmd/console/
func BenchmarkQuarantinePage(b *testing.B) {
	n := testenv.StartNATS(b)
	js := n.JetStream(b)
	topo := wire.Topology{}.WithDefaults()
	require.NoError(b, consumers.Provision(context.Background(), js, topo, nil))
	fillQuarantine(b, js, topo, benchRecords)
	srv, err := console.New(console.Config{JetStream: js, Token: testToken})
	require.NoError(b, err)
	h := srv.Handler()
	for _, bc := range []struct{ name, path string }{
		{"All", "/quarantine"},
		{"LastPage", "/quarantine?page=200"},
		{"ReasonAndPersona", "/quarantine?reason=exhausted&reason=terminal&persona=planner"},
		{"Task", "/quarantine?task=task-77"},
		{"Overview", "/"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, bc.path, nil))
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s: %d", bc.path, rec.Code)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
		})
	}
}

var benchPersonas = []string{"planner", "context", "tester-qa", "lead-engineer"}

// fillQuarantine stores n records shaped like the runtime's: a request
// payload, three attempts of error history, the writer's headers.
func fillQuarantine(b *testing.B, js jetstream.JetStream, topo wire.Topology, n int) {
	b.Helper()
	reasons := []schemas.Reason{schemas.ReasonExhausted, schemas.ReasonTerminal, schemas.ReasonDeferred}
	for i := range n {
		persona, reason := benchPersonas[i%len(benchPersonas)], reasons[i%len(reasons)]
		req := schemas.NewRequest(fmt.Sprintf("task-%d", i%500), "main", persona)
		payload, err := schemas.Encode(req)
		require.NoError(b, err)
		rec := &schemas.QuarantineRecord{SchemaVersion: schemas.Version, ID: fmt.Sprintf("q.BENCH.%d", i), Reason: reason,
			Detail: "all 3 attempts failed", OriginalSubject: topo.RequestSubject(persona), Payload: payload,
			Attempts: 3, RequestID: req.RequestID, TaskID: req.TaskID, Step: "main", Persona: persona,
			QuarantinedAt: time.Now().UTC()}
		for a := 1; a <= 3; a++ {
			rec.Errors = append(rec.Errors, schemas.AttemptRecord{Attempt: a, Agent: "agent-a", Class: "retryable",
				Error: "HTTP 503 InternalServerError: upstream overloaded", DurationMs: 1200, At: time.Now().UTC()})
		}
		data, err := schemas.Encode(rec)
		require.NoError(b, err)
		msg := &nats.Msg{Subject: topo.QuarantineSubject(string(reason), persona), Data: data, Header: nats.Header{}}
		msg.Header.Set(schemas.HeaderReason, string(reason))
		msg.Header.Set(schemas.HeaderPersona, persona)
		msg.Header.Set(schemas.HeaderTask, req.TaskID)
		_, err = js.PublishMsgAsync(msg)
		require.NoError(b, err)
		if i%1000 == 999 {
			waitPublished(b, js)
		}
	}
	waitPublished(b, js)
}

func waitPublished(b *testing.B, js jetstream.JetStream) {
	b.Helper()
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("publishing the records took over a minute")
	}
}
