package schemas_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

// requireFastSound holds for any input: what the fast path accepts, the
// full path accepts too, as the same value (reflect.DeepEqual: time
// locations and empty against nil slices count), and the value shares no
// memory with the input, which the caller may reuse.
func requireFastSound[T any](t *testing.T, data []byte, fast func([]byte) (*T, bool), full func([]byte) (*T, error)) {
	t.Helper()
	buf := bytes.Clone(data)
	got, ok := fast(buf)
	if !ok {
		require.Nil(t, got)
		return
	}
	for i := range buf {
		buf[i] = '#'
	}
	want, err := full(data)
	require.NoError(t, err, "fast path accepted what the schema rejects: %q", data)
	require.Empty(t, cmp.Diff(want, got), "input: %q", data)
	require.True(t, reflect.DeepEqual(want, got), "input: %q\nfull: %#v\nfast: %#v", data, want, got)
}

// requireSameAnswer holds for any input: DecodeRequest (fast path first)
// answers exactly as the full path alone, error included.
func requireSameAnswer(t *testing.T, data []byte) {
	t.Helper()
	got, gotErr := schemas.DecodeRequest(data)
	want, wantErr := schemas.FullDecodeRequest(data)
	require.Equal(t, wantErr, gotErr, "input: %q", data)
	require.True(t, reflect.DeepEqual(want, got), "input: %q\nfull: %#v\ngot: %#v", data, want, got)
}

func FuzzFastRequest(f *testing.F) {
	seedFuzz(f, validRequest())
	for _, s := range fastSeedsRequest {
		f.Add([]byte(s))
	}
	for _, c := range fastRequestCases {
		f.Add([]byte(c.json))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		requireFastSound(t, data, schemas.FastDecodeRequest, schemas.FullDecodeRequest)
		requireSameAnswer(t, data)
	})
}

func FuzzFastOutcome(f *testing.F) {
	seedFuzz(f, validOutcome())
	for _, s := range fastSeedsOutcome {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		requireFastSound(t, data, schemas.FastDecodeOutcome, schemas.FullDecodeOutcome)
	})
}

const minReq = `"schema_version":1,"request_id":"r","task_id":"t","step":"s","persona":"p","created_at":"2025-01-01T00:00:00Z"`

// fastSeedsRequest are valid requests and near misses that json.Unmarshal
// alone would accept.
var fastSeedsRequest = []string{
	`{` + minReq + `}`,
	` {` + minReq + `,"agents":{"primary":"a","fallback":""},"input":null,"policy":"","policy_overrides":{},"progress_total":0,"correlation_id":""} `,
	`{` + minReq + `,"policy_overrides":{"max_attempts":100,"attempt_timeout_ms":86400000,"backoff_ms":[0,86400000],"non_retryable":["E"]}}`,
	`{` + minReq + `,"input":{"a":[null,1.5e3,"\u00e9",true,false,{}]}}`,
	`{` + minReq + `,"Persona":"p"}`,
	`{` + minReq + `,"ſtep":"s"}`,
	`{` + minReq + `,"persona":"x"}`,
	`{` + minReq + `,"agents":{"primary":"a"},"agents":{"fallback":"b"}}`,
	`{` + minReq + `,"agents":{"primary":"a","PRIMARY":"b"}}`,
	`{` + minReq + `,"agents":{}}`,
	`{` + minReq + `,"agents":null}`,
	`{` + minReq + `,"policy":null}`,
	`{` + minReq + `,"policy_overrides":null}`,
	`{` + minReq + `,"policy_overrides":{"max_attempts":0}}`,
	`{` + minReq + `,"policy_overrides":{"max_attempts":-0}}`,
	`{` + minReq + `,"policy_overrides":{"attempt_timeout_ms":0}}`,
	`{` + minReq + `,"policy_overrides":{"queue_wait_ms":86400000}}`,
	`{` + minReq + `,"policy_overrides":{"queue_wait_ms":0}}`,
	`{` + minReq + `,"policy_overrides":{"backoff_ms":[null]}}`,
	`{` + minReq + `,"policy_overrides":{"backoff_ms":null}}`,
	`{` + minReq + `,"policy_overrides":{"non_retryable":[""]}}`,
	`{` + minReq + `,"progress_total":2147483648}`,
	`{` + minReq + `,"progress_total":-0}`,
	`{` + minReq + `,"correlation_id":"\u00e9\ud800"}`,
	`{"schema_version":1,"request_id":"r","task_id":"t","step":"s","persona":"p","created_at":"0001-01-01T00:00:00Z"}`,
	`{"schema_version":1,"request_id":"r","task_id":"t","step":"s","persona":"p","created_at":"2025-01-01T00:00:00.5+01:00"}`,
	`{"schema_version":1,"request_id":"r","task_id":"t","step":"s","persona":"p","created_at":"2025-01-01T00:00:00\u005a"}`,
	`{"schema_version":1,"request_id":"r","task_id":"t","step":"s","persona":"p"}`,
	`{"schema_version":1,"request_id":"r","task_id":"t","step":"s","persona":"p","created_at":null}`,
	`{"schema_version":1,"request_id":null,"task_id":"t","step":"s","persona":"p","created_at":"2025-01-01T00:00:00Z"}`,
	`{"\u0073chema_version":1,"request_id":"r","task_id":"t","step":"s","persona":"p","created_at":"2025-01-01T00:00:00Z"}`,
	`{` + minReq + `,"budget":{"max_tokens":1000,"max_cost_usd":2.5}}`,
	`{` + minReq + `,"budget":{}}`,
	`{` + minReq + `,"budget":null}`,
	`{` + minReq + `,"budget":{"max_tokens":-1}}`,
	`{` + minReq + `,"budget":{"max_cost_usd":-0.5}}`,
	`{` + minReq + `,"budget":{"max_cost_usd":-0}}`,
	`{` + minReq + `,"budget":{"max_tokens":1e3}}`,
	`{` + minReq + `,"budget":{"max_tokens":null}}`,
	`{` + minReq + `,"budget":{"MAX_TOKENS":5}}`,
	`{` + minReq + `,"budget":{"max_tokens":1,"max_tokens":2}}`,
}

const minOut = `"schema_version":1,"request_id":"r","task_id":"t","step":"s","persona":"p","outcome":"succeeded","attempts":0,"duration_ms":0,"at":"2025-01-01T00:00:00Z"`

var fastSeedsOutcome = []string{
	`{` + minOut + `}`,
	`{` + minOut + `,"reason":"exhausted","agent":"","progress":{"completed":0,"total":0},"last_error":"","correlation_id":"","quarantine_seq":18446744073709551615}`,
	`{` + minOut + `,"reason":""}`,
	`{` + minOut + `,"reason":null}`,
	`{` + minOut + `,"progress":{}}`,
	`{` + minOut + `,"progress":{"total":1}}`,
	`{` + minOut + `,"progress":null}`,
	`{` + minOut + `,"attempts":2147483648}`,
	`{` + minOut + `,"Outcome":"failed"}`,
	`{"schema_version":1,"request_id":"r","task_id":"t","step":"s","persona":"p","outcome":"succeeded","duration_ms":0,"at":"2025-01-01T00:00:00Z"}`,
	// A terminal record with every field, then near misses of the fields
	// it adds.
	`{` + minOut + `,"detail":"d <x>","blocked":true,"output":{"a":[1,null]},"output_ref":{"bucket":"B","name":"n","size":0,"digest":"x"},` +
		`"submitted_at":"2024-12-31T23:59:59.5+01:00","cancelled_by":"cli","usage":{"input_tokens":1,"output_tokens":0,"cost_usd":0.5},` +
		`"request_digest":"sha256:0473760f249705bb560d707f5a4709ed1cf9b2acf7248be3eaa5167f2d138349"}`,
	`{` + strings.Replace(minOut, `"succeeded"`, `"cancelled"`, 1) + `,"reason":"queue_wait_exceeded","output":null,"usage":{"input_tokens":0,"output_tokens":0}}`,
	`{` + strings.Replace(minOut, `"succeeded"`, `"deadline_exceeded"`, 1) + `,"reason":"deadline_exceeded","output":"text"}`,
	`{` + minOut + `,"detail":null}`,
	`{` + minOut + `,"blocked":null}`,
	`{` + minOut + `,"blocked":"true"}`,
	`{` + minOut + `,"output_ref":{"bucket":"B","name":"n","size":0}}`,
	`{` + minOut + `,"output_ref":{"bucket":"","name":"n","size":0,"digest":"x"}}`,
	`{` + minOut + `,"output_ref":{"bucket":"B","name":"n","size":-1,"digest":"x"}}`,
	`{` + minOut + `,"output_ref":{"bucket":"B","name":"n","size":1.0,"digest":"x"}}`,
	`{` + minOut + `,"output_ref":null}`,
	`{` + minOut + `,"submitted_at":"2024-12-31t23:59:59Z"}`,
	`{` + minOut + `,"submitted_at":null}`,
	`{` + minOut + `,"usage":{"input_tokens":1}}`,
	`{` + minOut + `,"usage":{"input_tokens":1,"output_tokens":-1}}`,
	`{` + minOut + `,"usage":{"input_tokens":1,"output_tokens":1,"cost_usd":-0}}`,
	`{` + minOut + `,"usage":{"input_tokens":1,"output_tokens":1,"cost_usd":-1e-400}}`,
	`{` + minOut + `,"usage":{"input_tokens":1,"output_tokens":1,"cost_usd":1e400}}`,
	`{` + minOut + `,"usage":{"input_tokens":1,"output_tokens":1,"cost_usd":null}}`,
	`{` + minOut + `,"usage":{"input_tokens":1,"output_tokens":1,"cost":1}}`,
	`{` + minOut + `,"request_digest":"sha256:0473760F249705bb560d707f5a4709ed1cf9b2acf7248be3eaa5167f2d138349"}`,
	`{` + minOut + `,"request_digest":"sha256:0473"}`,
	`{` + minOut + `,"request_digest":"\u0073ha256:0473760f249705bb560d707f5a4709ed1cf9b2acf7248be3eaa5167f2d138349"}`,
	`{` + minOut + `,"cancelled_by":"` + strings.Repeat("é", 257) + `"}`,
}

// TestFastPathTakesValidMessages guards the speed-up itself: well-formed
// messages must not fall back, and every seed must be sound.
func TestFastPathTakesValidMessages(t *testing.T) {
	t.Parallel()
	for _, msg := range []*schemas.PersonaRequest{validRequest(), schemas.NewRequest("T-1", "plan", "planner")} {
		data, err := schemas.Encode(msg)
		require.NoError(t, err)
		got, ok := schemas.FastDecodeRequest(data)
		require.True(t, ok, "%s", data)
		require.Empty(t, cmp.Diff(msg, got))
	}
	data, err := schemas.Encode(validOutcome())
	require.NoError(t, err)
	got, ok := schemas.FastDecodeOutcome(data)
	require.True(t, ok, "%s", data)
	require.Empty(t, cmp.Diff(validOutcome(), got))

	budgeted := validRequest()
	budgeted.Budget = &schemas.Budget{MaxTokens: 1000, MaxCostUSD: 2.5}
	data, err = schemas.Encode(budgeted)
	require.NoError(t, err)
	gotReq, ok := schemas.FastDecodeRequest(data)
	require.True(t, ok, "%s", data)
	require.Empty(t, cmp.Diff(budgeted, gotReq))

	for _, s := range []string{fastSeedsRequest[0], fastSeedsRequest[1], fastSeedsRequest[2], fastSeedsRequest[3]} {
		_, ok := schemas.FastDecodeRequest([]byte(s))
		require.True(t, ok, "%s", s)
	}
	for _, s := range append(fastSeedsOutcome[:2:2], fastSeedsOutcome[10:13]...) {
		_, ok := schemas.FastDecodeOutcome([]byte(s))
		require.True(t, ok, "%s", s)
	}
	// The terminal record the runtime writes for a succeeded request.
	terminal := &schemas.OutcomeEvent{
		SchemaVersion: schemas.Version, RequestID: "req-1", TaskID: "TASK-42", Step: "plan", Persona: "planner",
		Outcome: schemas.OutcomeSucceeded, Attempts: 1, Agent: "claude", DurationMs: 3, At: at,
		Output: json.RawMessage(`{"ok":true}`), SubmittedAt: at.Add(-time.Second),
		Usage:         &schemas.Usage{InputTokens: 10, OutputTokens: 2, CostUSD: 0.25},
		RequestDigest: schemas.RequestDigest(validRequest()),
	}
	data, err = schemas.MarshalOutcome(terminal)
	require.NoError(t, err)
	got, ok = schemas.FastDecodeOutcome(data)
	require.True(t, ok, "%s", data)
	require.Empty(t, cmp.Diff(terminal, got))
	for _, s := range fastSeedsRequest {
		requireFastSound(t, []byte(s), schemas.FastDecodeRequest, schemas.FullDecodeRequest)
	}
	for _, s := range fastSeedsOutcome {
		requireFastSound(t, []byte(s), schemas.FastDecodeOutcome, schemas.FullDecodeOutcome)
	}
}

// TestFastPathSameErrors checks that DecodeRequest's answer, error text
// included, is the full path's for every seed.
func TestFastPathSameErrors(t *testing.T) {
	t.Parallel()
	for _, s := range fastSeedsRequest {
		got, gotErr := schemas.DecodeRequest([]byte(s))
		want, wantErr := schemas.FullDecodeRequest([]byte(s))
		require.Equal(t, wantErr, gotErr, "%s", s)
		require.Empty(t, cmp.Diff(want, got), "%s", s)
	}
	for _, s := range fastSeedsOutcome {
		got, gotErr := schemas.DecodeOutcome([]byte(s))
		want, wantErr := schemas.FullDecodeOutcome([]byte(s))
		require.Equal(t, wantErr, gotErr, "%s", s)
		require.Empty(t, cmp.Diff(want, got), "%s", s)
	}
}

// DecodeRequestInPlace decodes as DecodeRequest does, every seed included,
// with the input as data's own bytes: not a copy, and capped so an append
// to it leaves the rest of data as it was.
func TestDecodeRequestInPlace(t *testing.T) {
	t.Parallel()
	for _, s := range fastSeedsRequest {
		want, wantErr := schemas.DecodeRequest([]byte(s))
		got, err := schemas.DecodeRequestInPlace([]byte(s))
		if wantErr != nil {
			require.EqualError(t, err, wantErr.Error(), "%s", s)
			continue
		}
		require.NoError(t, err, "%s", s)
		require.Empty(t, cmp.Diff(want, got), "%s", s)
	}
	data, err := schemas.Encode(validRequest())
	require.NoError(t, err)
	before := string(data)
	req, err := schemas.DecodeRequestInPlace(data)
	require.NoError(t, err)
	require.NotEmpty(t, req.Input)
	i := strings.Index(string(data), string(req.Input))
	require.GreaterOrEqual(t, i, 0)
	require.Same(t, &data[i], &req.Input[0], "the input is data's own bytes")
	_ = append(req.Input, "written past the input"...)
	require.Equal(t, before, string(data), "an append to the input does not write into data")
}
