package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
)

// DecodeRequest decodes and validates a PersonaRequest. See the package
// documentation for the checks and the errors they return.
func DecodeRequest(data []byte) (*PersonaRequest, error) {
	if v, ok := fastDecodeRequest(data); ok {
		return v, nil
	}
	return decode[PersonaRequest](requestSchema, data)
}

// DecodeRequestInPlace is DecodeRequest for a caller that neither modifies
// nor reuses data afterwards: the request's Input is data's own bytes
// instead of a copy. The runtime decodes each delivery's payload this way:
// it keeps the payload for as long as the request runs anyway.
func DecodeRequestInPlace(data []byte) (*PersonaRequest, error) {
	if v, ok := fastDecodeRequestIn(data, true); ok {
		return v, nil
	}
	return decode[PersonaRequest](requestSchema, data)
}

// DecodeOutcome decodes and validates an OutcomeEvent.
func DecodeOutcome(data []byte) (*OutcomeEvent, error) {
	if v, ok := fastDecodeOutcome(data); ok {
		return v, nil
	}
	return decode[OutcomeEvent](outcomeSchema, data)
}

// DecodeQuarantineRecord decodes and validates a QuarantineRecord.
func DecodeQuarantineRecord(data []byte) (*QuarantineRecord, error) {
	return decode[QuarantineRecord](quarantineSchema, data)
}

// DecodeCompensation decodes and validates a CompensationRequest.
func DecodeCompensation(data []byte) (*CompensationRequest, error) {
	return decode[CompensationRequest](compensationSchema, data)
}

func decode[T any](id schemaID, data []byte) (*T, error) {
	if err := check(id, data); err != nil {
		return nil, err
	}
	v := new(T)
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fromUnmarshal(err)
	}
	return v, nil
}

// fromUnmarshal covers what a schema cannot see: JSON Schema treats 1.0 and
// 1e2 as integers, json.Unmarshal into an int does not.
func fromUnmarshal(err error) *FieldError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &FieldError{Field: te.Field, Problem: fmt.Sprintf("cannot hold %s in a Go %s", te.Value, te.Type)}
	}
	return &FieldError{Problem: err.Error()}
}
