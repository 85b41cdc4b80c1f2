package schemas_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

type decodeFunc func([]byte) (any, error)

func decoderOf[T any](f func([]byte) (*T, error)) decodeFunc {
	return func(b []byte) (any, error) { return f(b) }
}

var (
	decodeRequest      = decoderOf(schemas.DecodeRequest)
	decodeOutcome      = decoderOf(schemas.DecodeOutcome)
	decodeQuarantine   = decoderOf(schemas.DecodeQuarantineRecord)
	decodeCompensation = decoderOf(schemas.DecodeCompensation)
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	minimal := &schemas.PersonaRequest{
		SchemaVersion: 1, RequestID: "r", TaskID: "t", Step: "s", Persona: "p", CreatedAt: at,
	}
	succeeded := &schemas.OutcomeEvent{
		SchemaVersion: 1, RequestID: "r", TaskID: "t", Step: "s", Persona: "p",
		Outcome: schemas.OutcomeSucceeded, Attempts: 1, At: at,
	}
	tests := []struct {
		name   string
		msg    any
		decode decodeFunc
	}{
		{"Request", validRequest(), decodeRequest},
		{"MinimalRequest", minimal, decodeRequest},
		{"NewRequest", schemas.NewRequest("T-1", "review", "tester-qa"), decodeRequest},
		{"Outcome", validOutcome(), decodeOutcome},
		{"SucceededOutcome", succeeded, decodeOutcome},
		{"QuarantineRecord", validQuarantineRecord(), decodeQuarantine},
		{"Compensation", validCompensation(), decodeCompensation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data, err := schemas.Encode(tt.msg)
			require.NoError(t, err)
			got, err := tt.decode(data)
			require.NoError(t, err)
			require.Empty(t, cmp.Diff(tt.msg, got))
		})
	}
}

func TestDecodeRequestInvalidField(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 257)
	tests := []struct {
		name  string
		path  string
		value any
		field string
	}{
		{"MissingRequestID", "request_id", deleted, "request_id"},
		{"EmptyRequestID", "request_id", "", "request_id"},
		{"LongRequestID", "request_id", long, "request_id"},
		{"MissingTaskID", "task_id", deleted, "task_id"},
		{"TaskIDWithDot", "task_id", "a.b", "task_id"},
		{"MissingStep", "step", deleted, "step"},
		{"StepWithWildcard", "step", "*", "step"},
		{"MissingPersona", "persona", deleted, "persona"},
		{"PersonaWithSpace", "persona", "lead engineer", "persona"},
		{"PersonaWithGreaterThan", "persona", ">", "persona"},
		{"PersonaNotString", "persona", 7, "persona"},
		{"LongPersona", "persona", long, "persona"},
		{"MissingCreatedAt", "created_at", deleted, "created_at"},
		{"CreatedAtNotRFC3339", "created_at", "yesterday", "created_at"},
		{"CreatedAtLeapSecond", "created_at", "2016-12-31T23:59:60Z", "created_at"},
		{"CreatedAtLowercaseT", "created_at", "2016-12-31t23:59:59Z", "created_at"},
		{"CreatedAtOneDigitHour", "created_at", "2016-12-31T3:59:59Z", "created_at"},
		{"CreatedAtNoZone", "created_at", "2016-12-31T23:59:59", "created_at"},
		{"AgentsWithoutPrimary", "agents.primary", deleted, "agents.primary"},
		{"AgentsEmptyPrimary", "agents.primary", "", "agents.primary"},
		{"AgentsNotObject", "agents", "claude", "agents"},
		{"ProgressTotalNegative", "progress_total", -1, "progress_total"},
		{"ProgressTotalFraction", "progress_total", 1.5, "progress_total"},
		{"ProgressTotalHuge", "progress_total", 1e30, "progress_total"},
		{"ProgressTotalExponent", "progress_total", json.Number("1e2"), "progress_total"},
		{"MaxAttemptsZero", "policy_overrides.max_attempts", 0, "policy_overrides.max_attempts"},
		{"MaxAttemptsTooMany", "policy_overrides.max_attempts", 101, "policy_overrides.max_attempts"},
		{"AttemptTimeoutZero", "policy_overrides.attempt_timeout_ms", 0, "policy_overrides.attempt_timeout_ms"},
		{"BackoffNegative", "policy_overrides.backoff_ms", []int{30, -1}, "policy_overrides.backoff_ms.1"},
		{"NonRetryableEmptyName", "policy_overrides.non_retryable", []string{""}, "policy_overrides.non_retryable.0"},
		{"UnknownPolicyOverride", "policy_overrides.max_retries", 3, "policy_overrides.max_retries"},
		{"UnknownField", "personna", "planner", "personna"},
		{"CaseVariantOfField", "PERSONA", "bad persona", "PERSONA"},
		{"SchemaVersionMissing", "schema_version", deleted, "schema_version"},
		{"SchemaVersionString", "schema_version", "1", "schema_version"},
		{"SchemaVersionFraction", "schema_version", json.Number("1.0"), "schema_version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := schemas.DecodeRequest(mutated(t, validRequest(), tt.path, tt.value))
			requireFieldError(t, err, tt.field)
		})
	}
}

func TestDecodeInvalidField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		msg    any
		decode decodeFunc
		path   string
		value  any
		field  string
	}{
		{"OutcomeUnknown", validOutcome(), decodeOutcome, "outcome", "failed", "outcome"},
		{"OutcomeMissing", validOutcome(), decodeOutcome, "outcome", deleted, "outcome"},
		{"OutcomeReasonUnknown", validOutcome(), decodeOutcome, "reason", "bored", "reason"},
		{"OutcomeAttemptsMissing", validOutcome(), decodeOutcome, "attempts", deleted, "attempts"},
		{"OutcomeProgressWithoutTotal", validOutcome(), decodeOutcome, "progress.total", deleted, "progress.total"},
		{"OutcomeSeqNegative", validOutcome(), decodeOutcome, "quarantine_seq", -1, "quarantine_seq"},
		{"OutcomeSeqOverflow", validOutcome(), decodeOutcome, "quarantine_seq", json.Number("18446744073709551616"), "quarantine_seq"},
		{"OutcomePersonaUnsafe", validOutcome(), decodeOutcome, "persona", "a.b", "persona"},
		{"QuarantineReasonUnknown", validQuarantineRecord(), decodeQuarantine, "reason", "bored", "reason"},
		{"QuarantineReasonMissing", validQuarantineRecord(), decodeQuarantine, "reason", deleted, "reason"},
		{"QuarantinePayloadMissing", validQuarantineRecord(), decodeQuarantine, "payload", deleted, "payload"},
		{"QuarantinePayloadNotBase64", validQuarantineRecord(), decodeQuarantine, "payload", "not base64!", "payload"},
		{"QuarantinePayloadNotString", validQuarantineRecord(), decodeQuarantine, "payload", []int{1, 2}, "payload"},
		{"QuarantineSubjectMissing", validQuarantineRecord(), decodeQuarantine, "original_subject", deleted, "original_subject"},
		{"QuarantineSubjectEmpty", validQuarantineRecord(), decodeQuarantine, "original_subject", "", "original_subject"},
		{"QuarantineDetailEmpty", validQuarantineRecord(), decodeQuarantine, "detail", "", "detail"},
		{"QuarantineIDMissing", validQuarantineRecord(), decodeQuarantine, "id", deleted, "id"},
		{"QuarantineHeaderNotList", validQuarantineRecord(), decodeQuarantine, "headers.Nats-Msg-Id", "req-1", "headers.Nats-Msg-Id"},
		{"QuarantineAttemptClassMissing", validQuarantineRecord(), decodeQuarantine, "errors.0.class", deleted, "errors.0.class"},
		{"QuarantineAttemptAtBad", validQuarantineRecord(), decodeQuarantine, "errors.0.at", "later", "errors.0.at"},
		{"QuarantineLineageCountNegative", validQuarantineRecord(), decodeQuarantine, "lineage.replay_count", -1, "lineage.replay_count"},
		{"CompensationSagaIDMissing", validCompensation(), decodeCompensation, "saga_id", deleted, "saga_id"},
		{"CompensationKindMissing", validCompensation(), decodeCompensation, "kind", deleted, "kind"},
		{"CompensationKindEmpty", validCompensation(), decodeCompensation, "kind", "", "kind"},
		{"CompensationKindLowercase", validCompensation(), decodeCompensation, "kind", "delete_branch", "kind"},
		{"CompensationTargetMissing", validCompensation(), decodeCompensation, "target", deleted, "target"},
		{"CompensationTargetEmpty", validCompensation(), decodeCompensation, "target", "", "target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.decode(mutated(t, tt.msg, tt.path, tt.value))
			requireFieldError(t, err, tt.field)
		})
	}
}

func requireFieldError(t *testing.T, err error, field string) {
	t.Helper()
	require.ErrorIs(t, err, schemas.ErrInvalid)
	var fe *schemas.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, field, fe.Field, "error: %v", err)
	require.NotEmpty(t, fe.Problem)
	require.Equal(t, "invalid message: "+field+": "+fe.Problem, err.Error())
}

func TestDecodeFieldErrorText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		path  string
		value any
		want  string
	}{
		{"Pattern", "persona", "lead engineer", "invalid message: persona: must match ^[A-Za-z0-9_-]+$"},
		{"Required", "agents.primary", deleted, "invalid message: agents.primary: is required"},
		{"Empty", "request_id", "", "invalid message: request_id: must not be empty"},
		{"Type", "progress_total", "5", "invalid message: progress_total: must be an integer"},
		{"Minimum", "policy_overrides.max_attempts", 0, "invalid message: policy_overrides.max_attempts: must be at least 1"},
		{"Maximum", "policy_overrides.max_attempts", 101, "invalid message: policy_overrides.max_attempts: must be at most 100"},
		{"Unknown", "priority", 1, "invalid message: priority: is not a field of this message"},
		{"DateTime", "created_at", "2025-13-01T00:00:00Z", "invalid message: created_at: must be an RFC 3339 date-time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := schemas.DecodeRequest(mutated(t, validRequest(), tt.path, tt.value))
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestDecodeNamesFieldsInStableOrder(t *testing.T) {
	t.Parallel()
	m := asMap(t, validRequest())
	m["persona"] = "bad persona"
	m["step"] = "bad step"
	m["agents"] = map[string]any{}
	data, err := json.Marshal(m)
	require.NoError(t, err)
	for range 20 {
		_, err := schemas.DecodeRequest(data)
		requireFieldError(t, err, "agents.primary")
	}
}

func TestDecodeUnknownVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		version any
		want    string
	}{
		{"Two", 2, "unknown schema version: schema_version 2 (this build knows 1)"},
		{"Zero", 0, "unknown schema version: schema_version 0 (this build knows 1)"},
		{"Negative", -1, "unknown schema version: schema_version -1 (this build knows 1)"},
		{"Huge", json.Number("99999999999999999999"), "unknown schema version: schema_version 99999999999999999999 (this build knows 1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, decode := range []decodeFunc{decodeRequest, decodeOutcome, decodeQuarantine, decodeCompensation} {
				// The version is checked before the schema, so an otherwise
				// empty message reports the version, not missing fields.
				_, err := decode(mutated(t, map[string]any{}, "schema_version", tt.version))
				require.ErrorIs(t, err, schemas.ErrUnknownVersion)
				require.NotErrorIs(t, err, schemas.ErrInvalid)
				require.EqualError(t, err, tt.want)
			}
		})
	}
}

func TestDecodeTooLarge(t *testing.T) {
	t.Parallel()
	req := validRequest()
	req.Input = json.RawMessage(`"` + strings.Repeat("a", schemas.MaxPayloadBytes) + `"`)
	data, err := json.Marshal(req)
	require.NoError(t, err)
	for _, decode := range []decodeFunc{decodeRequest, decodeOutcome, decodeQuarantine, decodeCompensation} {
		_, err := decode(data)
		require.ErrorIs(t, err, schemas.ErrTooLarge)
		require.ErrorContains(t, err, "bytes")
	}
	_, err = schemas.Encode(req)
	require.ErrorIs(t, err, schemas.ErrTooLarge)
}

func TestDecodeAtSizeLimit(t *testing.T) {
	t.Parallel()
	req := validRequest()
	base, err := json.Marshal(req)
	require.NoError(t, err)
	// Swap the input for a string that brings the message to the limit.
	pad := schemas.MaxPayloadBytes - len(base) + len(req.Input) - len(`""`)
	req.Input = json.RawMessage(`"` + strings.Repeat("a", pad) + `"`)
	data, err := json.Marshal(req)
	require.NoError(t, err)
	require.Len(t, data, schemas.MaxPayloadBytes)
	_, err = schemas.DecodeRequest(data)
	require.NoError(t, err)
}

func TestDecodeNotAnObject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data []byte
	}{
		{"Empty", nil},
		{"Whitespace", []byte(" \n\t")},
		{"Garbage", []byte("\x00\xff\xfe garbage")},
		{"Truncated", []byte(`{"schema_version":1,"request_id":`)},
		{"TrailingData", []byte(`{"schema_version":1} {}`)},
		{"TrailingGarbage", []byte(`{"schema_version":1}x`)},
		{"Null", []byte("null")},
		{"Number", []byte("1")},
		{"String", []byte(`"persona"`)},
		{"Array", []byte(`[{"schema_version":1}]`)},
		{"InvalidUTF8Key", []byte("{\"\xff\":1}")},
		{"DeepNesting", bytes.Repeat([]byte("["), 20000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, decode := range []decodeFunc{decodeRequest, decodeOutcome, decodeQuarantine, decodeCompensation} {
				_, err := decode(tt.data)
				require.ErrorIs(t, err, schemas.ErrInvalid)
				var fe *schemas.FieldError
				require.True(t, errors.As(err, &fe))
			}
		})
	}
}
