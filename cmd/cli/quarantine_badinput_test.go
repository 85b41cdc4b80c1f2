package cli_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

func TestQuarantinePurgeSameSequenceTwiceCountsOne(t *testing.T) {
	t.Parallel()
	env := newQuarantineEnv(t)
	seq := fmt.Sprint(env.seqs["p1"])
	code, out, errOut := qrun(t, env.url, "quarantine", "purge", seq, seq, "--yes")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "purged 1 of 1 records (0 failed)")
}

// startUsersNATS runs JetStream with an admin user and a publisher that
// may only publish requests (as in the example deployments).
func startUsersNATS(t *testing.T) *server.Server {
	t.Helper()
	opts := &server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Users: []*server.User{
			{Username: "admin", Password: "a"},
			{Username: "publisher", Password: "p", Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: []string{"$JS.API.INFO", "personaq.requests.>"}},
				Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
			}},
		},
	}
	srv, err := server.NewServer(opts)
	require.NoError(t, err)
	srv.Start()
	require.True(t, srv.ReadyForConnections(10*time.Second))
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv
}

func userURL(srv *server.Server, user, pass string) string {
	return strings.Replace(srv.ClientURL(), "nats://", "nats://"+user+":"+pass+"@", 1)
}

// A user without the permission gets an error naming what the server
// refused, at once — not "context deadline exceeded" after 5 s.
func TestQuarantineCommandsNamePermissionViolations(t *testing.T) {
	t.Parallel()
	srv := startUsersNATS(t)
	admin := userURL(srv, "admin", "a")
	code, _, errOut := qrun(t, admin, "quarantine", "stats")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "quarantine stream missing", "the admin may look")

	cfgPath := filepath.Join(t.TempDir(), "personaq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("personas:\n  echo:\n    invoker: {type: demo, demo: echo}\n"), 0o600))
	for _, args := range [][]string{
		{"quarantine", "ls"}, {"quarantine", "stats"}, {"quarantine", "show", "1"},
		{"quarantine", "purge", "1", "--yes"}, {"streams", "init", "--config", cfgPath},
	} {
		t.Run(strings.Join(args[:2], "-"), func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			code, _, errOut := qrun(t, userURL(srv, "publisher", "p"), args...)
			require.NotEqual(t, 0, code)
			require.Less(t, time.Since(start), 3*time.Second, "fails at once")
			require.Contains(t, errOut, "NATS permission denied")
			require.Contains(t, errOut, `"$JS.API.`, "names the subject refused")
			require.NotContains(t, errOut, "deadline exceeded")
		})
	}
}

// streams init creates the quarantine's KV index and payload object store,
// so the first record on a fresh server finds them.
func TestStreamsInitCreatesQuarantineBuckets(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	cfgPath := filepath.Join(t.TempDir(), "personaq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("personas:\n  echo:\n    invoker: {type: demo, demo: echo}\n"), 0o600))
	code, out, errOut := qrun(t, n.URL(), "streams", "init", "--config", cfgPath)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, schemas.DefaultQuarantineIndexBucket)
	require.Contains(t, out, schemas.DefaultQuarantinePayloadBucket)
	js := n.JetStream(t)
	_, err := js.KeyValue(context.Background(), schemas.DefaultQuarantineIndexBucket)
	require.NoError(t, err)
	_, err = js.ObjectStore(context.Background(), schemas.DefaultQuarantinePayloadBucket)
	require.NoError(t, err)

	code, _, errOut = qrun(t, n.URL(), "streams", "init", "--config", cfgPath)
	require.Equal(t, 0, code, "idempotent: %s", errOut)
}

// show reads a payload kept out of line back, byte for byte.
func TestQuarantineShowReadsOutOfLinePayload(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	js := n.JetStream(t)
	topo := wire.Topology{}.WithDefaults()
	require.NoError(t, consumers.Provision(context.Background(), js, topo, nil))
	payload := make([]byte, 800_000)
	_, err := rand.Read(payload)
	require.NoError(t, err)
	rec := &schemas.QuarantineRecord{
		SchemaVersion: schemas.Version, ID: dlq.RecordID(topo.RequestsStream, 5), Reason: schemas.ReasonInvalidMessage,
		Detail: "invalid message: not valid JSON", OriginalSubject: topo.RequestSubject("echo"), Payload: payload,
		Headers: map[string][]string{"X-Bin": {"\xff\x01"}}, Persona: "echo", QuarantinedAt: time.Now().UTC(),
	}
	seq, _, err := dlq.NewWriter(js, topo.QuarantineSubject).Put(context.Background(), rec)
	require.NoError(t, err)

	code, out, errOut := qrun(t, n.URL(), "quarantine", "show", fmt.Sprint(seq))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "payload (800000 bytes, kept out of line: object q.PERSONAQ_REQUESTS.5.")
	require.Contains(t, out, "the first 65536 shown")
	require.Contains(t, out, "X-Bin: "+dlq.HeaderBase64Prefix+"/wE=")

	code, out, errOut = qrun(t, n.URL(), "quarantine", "show", fmt.Sprint(seq), "-o", "json")
	require.Equal(t, 0, code, errOut)
	var got struct {
		Record   schemas.QuarantineRecord `json:"record"`
		Original struct {
			Headers map[string][]string `json:"headers"`
			Payload []byte              `json:"payload"`
		} `json:"original"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.NotNil(t, got.Record.PayloadRef)
	require.True(t, bytes.Equal(payload, got.Original.Payload))
	require.Equal(t, map[string][]string{"X-Bin": {dlq.HeaderBase64Prefix + "/wE="}}, got.Original.Headers)

	obs, err := js.ObjectStore(context.Background(), schemas.DefaultQuarantinePayloadBucket)
	require.NoError(t, err)
	require.NoError(t, obs.Delete(context.Background(), got.Record.PayloadRef.Name))
	code, out, errOut = qrun(t, n.URL(), "quarantine", "show", fmt.Sprint(seq))
	require.Equal(t, 1, code)
	require.Contains(t, out, "payload (unavailable")
	require.Contains(t, errOut, "quarantined payload missing")
}
