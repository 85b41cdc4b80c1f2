package schemas

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Encode marshals a message — a PersonaRequest, OutcomeEvent,
// QuarantineRecord or CompensationRequest, by value or pointer — and
// validates the result against its schema, so that nothing is published
// that a consumer would reject. It sets no field: a zero schema_version is
// an error (ErrUnknownVersion), not a default. Errors are those of the
// decoders, wrapped with the type.
func Encode(v any) ([]byte, error) {
	id, ok := schemaOf(v)
	if !ok {
		return nil, fmt.Errorf("%w: %T is not a message type of package schemas", ErrInvalid, v)
	}
	if field, bad := invalidText(v); bad {
		return nil, fmt.Errorf("encode %T: %w", v, &FieldError{Field: field, Problem: "not valid UTF-8"})
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	if certainlyValid(id, data) {
		return data, nil
	}
	if err := check(id, data); err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return data, nil
}

// certainlyValid asks the decoders' fast paths, where a message type has
// one: they answer valid only for a message the schema accepts (and leave
// every doubt to check, which finds and reports the error), at a fraction
// of the schema validator's cost, which producers paid per request.
func certainlyValid(id schemaID, data []byte) bool {
	switch id {
	case requestSchema:
		_, ok := fastDecodeRequest(data)
		return ok
	case outcomeSchema:
		_, ok := fastDecodeOutcome(data)
		return ok
	}
	return false
}

func schemaOf(v any) (schemaID, bool) {
	switch v.(type) {
	case PersonaRequest, *PersonaRequest:
		return requestSchema, true
	case OutcomeEvent, *OutcomeEvent:
		return outcomeSchema, true
	case QuarantineRecord, *QuarantineRecord:
		return quarantineSchema, true
	case CompensationRequest, *CompensationRequest:
		return compensationSchema, true
	case AttemptEvent, *AttemptEvent:
		return attemptSchema, true
	case OutputChunk, *OutputChunk:
		return outputChunkSchema, true
	}
	return 0, false
}

// NewRequest returns a request with the version, a random (v4 UUID)
// request ID and the creation time set; the caller fills the rest.
func NewRequest(taskID, step, persona string) *PersonaRequest {
	return &PersonaRequest{
		SchemaVersion: Version,
		RequestID:     uuid.NewString(),
		TaskID:        taskID,
		Step:          step,
		Persona:       persona,
		CreatedAt:     time.Now().UTC(),
	}
}
