package consumers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// propertySeedEnv changes the seed of TestBadInputEndsAsOneExactRecord
// (default 15): PERSONAQ_PROPERTY_SEED=7 go test -run BadInput ./consumers/
const propertySeedEnv = "PERSONAQ_PROPERTY_SEED"

// badInput is one message the property test publishes.
type badInput struct {
	kind   string
	header nats.Header
	body   []byte
}

// Whatever is published on a served subject — random bytes, near-valid
// JSON, invalid UTF-8, bodies and headers up to the server's max_payload —
// ends as exactly one quarantine record whose payload and headers are the
// published ones, byte for byte, and the replica keeps serving.
func TestBadInputEndsAsOneExactRecord(t *testing.T) {
	t.Parallel()
	seed := uint64(15)
	if s := os.Getenv(propertySeedEnv); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, propertySeedEnv)
	}
	t.Logf("seed %d (set %s to change it)", seed, propertySeedEnv)
	rng := rand.New(rand.NewPCG(seed, seed))

	h := newHarness(t, true)
	maxPayload := int(h.nats.Conn(t).MaxPayload())
	terminal := handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{}, handlers.Terminal(errors.New("property test: every valid request fails for good"))
	})
	ok := handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) { return handlers.Result{}, nil })
	r := h.start(persona("prop", terminal, fastPolicy(1)), persona("ok", ok, fastPolicy(1)))
	out := h.watchOutcomes()

	inputs := make([]badInput, 48)
	seqs := make([]uint64, len(inputs))
	for i := range inputs {
		inputs[i] = genBadInput(rng, maxPayload)
		ack, err := h.js.PublishMsg(context.Background(), &nats.Msg{
			Subject: h.topo.RequestSubject("prop"), Header: inputs[i].header, Data: inputs[i].body,
		})
		require.NoError(t, err, "input %d (%s, %d bytes)", i, inputs[i].kind, len(inputs[i].body))
		seqs[i] = ack.Sequence
	}

	insp, err := dlq.NewInspector(dlq.InspectorConfig{JetStream: h.js})
	require.NoError(t, err)
	var entries []dlq.Entry
	require.Eventually(t, func() bool {
		entries, err = insp.List(context.Background(), dlq.Filter{})
		require.NoError(t, err)
		return len(entries) >= len(inputs) && h.requestsLeft() == 0
	}, 90*time.Second, 50*time.Millisecond, "every input quarantined (seed %d)", seed)
	require.Len(t, entries, len(inputs), "one record per input, no more (seed %d)", seed)

	byID := map[string]*schemas.QuarantineRecord{}
	for _, e := range entries {
		require.NotNil(t, e.Record, "record %d decodes: %s", e.Seq, e.Err)
		require.NotContains(t, byID, e.Record.ID, "two records for one input")
		byID[e.Record.ID] = e.Record
	}
	outOfLine, binaryHeaders := 0, 0
	for i, in := range inputs {
		rec := byID[dlq.RecordID(h.topo.RequestsStream, seqs[i])]
		require.NotNil(t, rec, "input %d (%s) has its record (seed %d)", i, in.kind, seed)
		msg, err := insp.Message(context.Background(), rec)
		require.NoError(t, err)
		require.True(t, bytes.Equal(in.body, msg.Data), "input %d (%s, %d bytes): payload kept byte for byte (seed %d)", i, in.kind, len(in.body), seed)
		require.Equal(t, normalHeader(in.header), normalHeader(msg.Header), "input %d (%s): headers kept byte for byte (seed %d)", i, in.kind, seed)
		require.Contains(t, []schemas.Reason{schemas.ReasonInvalidMessage, schemas.ReasonTerminal}, rec.Reason)
		if rec.PayloadRef != nil {
			outOfLine++
		}
		for k, vs := range in.header {
			if !utf8.ValidString(k + strings.Join(vs, "")) {
				binaryHeaders++
				break
			}
		}
	}
	t.Logf("%d inputs: %d with the payload out of line, %d with headers that are not UTF-8", len(inputs), outOfLine, binaryHeaders)

	select {
	case err := <-r.done:
		t.Fatalf("the replica stopped: %v", err)
	default:
	}
	req := h.publish("ok", "after-bad-input")
	require.Equal(t, schemas.OutcomeSucceeded, out.wait(t, req.RequestID, 10*time.Second).Outcome, "the replica still serves")
}

// normalHeader treats a header without values as absent (nil and empty
// maps alike).
func normalHeader(h nats.Header) nats.Header {
	if len(h) == 0 {
		return nil
	}
	return h
}

// maxStreamHeaders: JetStream refuses a message whose headers exceed 64 KiB.
const maxStreamHeaders = 64<<10 - 1024

// genBadInput draws one message: random bytes, a valid request (its
// handler fails for good), a request with one thing wrong, or nothing,
// with random headers; headers and body together stay within maxPayload.
func genBadInput(rng *rand.Rand, maxPayload int) badInput {
	in := badInput{header: genHeaders(rng, maxStreamHeaders)}
	room := maxPayload - headerSize(in.header) - 64
	size := min(pickSize(rng, room), room)
	switch k := rng.IntN(10); {
	case k < 3:
		in.kind, in.body = "random bytes", randomBytes(rng, size)
	case k < 5:
		in.kind, in.body = "valid request", validRequestOfSize(size)
	case k < 9:
		in.kind, in.body = nearValid(rng, validRequestOfSize(size))
	default:
		in.kind, in.body = "empty", []byte{}
	}
	return in
}

// pickSize is mostly small, sometimes large, now and then close to room.
func pickSize(rng *rand.Rand, room int) int {
	switch k := rng.IntN(10); {
	case k < 6:
		return rng.IntN(2048)
	case k < 8:
		return rng.IntN(300_000)
	}
	return room - rng.IntN(4096)
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, max(n, 0))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// validRequestOfSize is a valid request for persona "prop" padded to
// about size bytes with its input (past MaxPayloadBytes it is too large,
// and so invalid).
func validRequestOfSize(size int) []byte {
	req := schemas.NewRequest("prop-task", "main", "prop")
	req.Input = json.RawMessage(`{"pad":""}`)
	base, _ := json.Marshal(req)
	if pad := size - len(base); pad > 0 {
		req.Input = json.RawMessage(`{"pad":"` + strings.Repeat("p", pad) + `"}`)
	}
	data, _ := json.Marshal(req)
	return data
}

// nearValid breaks a valid request in one way.
func nearValid(rng *rand.Rand, data []byte) (string, []byte) {
	at := func() int { return rng.IntN(len(data)) }
	switch rng.IntN(8) {
	case 0:
		return "invalid UTF-8 in request_id", bytes.Replace(data, []byte(`"request_id":"`), []byte("\"request_id\":\"\xff\xfe"), 1)
	case 1:
		return "lone surrogate escape", bytes.Replace(data, []byte(`"pad":"`), []byte(`"pad":"\ud800`), 1)
	case 2:
		return "truncated", data[:at()]
	case 3:
		b := bytes.Clone(data)
		b[at()] ^= byte(1 + rng.IntN(255))
		return "one byte flipped", b
	case 4:
		return "other persona", bytes.Replace(data, []byte(`"persona":"prop"`), []byte(`"persona":"ok"`), 1)
	case 5:
		return "newer schema", bytes.Replace(data, []byte(`"schema_version":1`), []byte(`"schema_version":2`), 1)
	case 6:
		return "invalid UTF-8 in input", bytes.Replace(data, []byte(`"pad":"`), []byte("\"pad\":\"\xc3("), 1)
	}
	return "trailing data", append(bytes.Clone(data), []byte(` {}`)...)
}

// genHeaders draws up to four headers (one may be large) whose values hold
// any bytes but CR and LF and do not start or end with spaces: what
// nats.go sends unchanged.
func genHeaders(rng *rand.Rand, maxBytes int) nats.Header {
	h := nats.Header{}
	for range rng.IntN(5) {
		key := "X-" + randomKey(rng)
		n := rng.IntN(40)
		if rng.IntN(20) == 0 {
			n = rng.IntN(maxBytes)
		}
		h.Add(key, headerValue(randomBytes(rng, n)))
		if headerSize(h) > maxBytes {
			h.Del(key)
		}
	}
	return h
}

func randomKey(rng *rand.Rand) string {
	const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!#$%&'*+^`|~"
	b := make([]byte, 1+rng.IntN(12))
	for i := range b {
		b[i] = chars[rng.IntN(len(chars))]
	}
	return string(b)
}

func headerValue(b []byte) string {
	for i, c := range b {
		if c == '\r' || c == '\n' {
			b[i] = 'x'
		}
	}
	return strings.Trim(string(b), " \t")
}

func headerSize(h nats.Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// The case: two requests whose ids differ only in bytes that are
// not UTF-8 were both decoded as "r\uFFFD", shared one ledger key, and the
// second was acked as a duplicate without running. Both are now
// invalid_message, kept byte for byte, and no handler runs.
func TestInvalidUTF8RequestsAreQuarantinedNotRepaired(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	var c calls
	h.start(persona("echo", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		c.add(req, "r1")
		return handlers.Result{}, nil
	}), fastPolicy(3)))
	out := h.watchOutcomes()
	var seqs []uint64
	var bodies [][]byte
	for _, id := range []string{"r\xff\xfe", "r\xfe\xff"} {
		body := []byte(`{"schema_version":1,"request_id":"` + id + `","task_id":"t","step":"s","persona":"echo","created_at":"2025-01-01T00:00:00Z"}`)
		ack, err := h.js.Publish(context.Background(), h.topo.RequestSubject("echo"), body)
		require.NoError(t, err)
		seqs, bodies = append(seqs, ack.Sequence), append(bodies, body)
	}
	require.Eventually(t, func() bool { return out.count() == 2 && h.requestsLeft() == 0 }, 10*time.Second, 10*time.Millisecond)
	byID := map[string]*schemas.QuarantineRecord{}
	for qseq := uint64(1); qseq <= 2; qseq++ {
		rec := h.quarantined(qseq)
		byID[rec.ID] = rec
	}
	for i, seq := range seqs {
		rec := byID[dlq.RecordID(h.topo.RequestsStream, seq)]
		require.NotNil(t, rec)
		require.Equal(t, schemas.ReasonInvalidMessage, rec.Reason)
		require.Contains(t, rec.Detail, "not valid UTF-8")
		require.Equal(t, bodies[i], rec.Payload)
	}
	require.Empty(t, c.forTask("t"), "no handler ran")
}
