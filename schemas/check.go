package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// check runs every test a message must pass before it is unmarshalled into
// its Go type, in the order the package documentation gives.
func check(id schemaID, data []byte) error {
	if len(data) > MaxPayloadBytes {
		return fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, len(data), MaxPayloadBytes)
	}
	doc, err := parseObject(data)
	if err != nil {
		return err
	}
	if err := checkVersion(doc); err != nil {
		return err
	}
	s, err := schemaFor(id)
	if err != nil {
		return err
	}
	if err := s.Validate(doc); err != nil {
		return fromValidation(err)
	}
	return nil
}

// parseObject decodes data into the generic form the validator walks.
// Numbers stay json.Number so bounds are checked on the exact value.
func parseObject(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, notJSON(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &FieldError{Problem: "not valid JSON: data after the top-level value"}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &FieldError{Problem: "must be a JSON object"}
	}
	return obj, nil
}

func notJSON(err error) *FieldError {
	if errors.Is(err, io.EOF) {
		return &FieldError{Problem: "not valid JSON: empty"}
	}
	return &FieldError{Problem: "not valid JSON: " + err.Error()}
}

// checkVersion runs before the schema so that a message from a newer
// producer is reported as ErrUnknownVersion, not as a list of schema
// failures. The version must be an integer literal: 1.0 would pass a
// schema but not json.Unmarshal into an int.
func checkVersion(doc map[string]any) error {
	raw, ok := doc["schema_version"]
	if !ok {
		return &FieldError{Field: "schema_version", Problem: "is required"}
	}
	n, ok := raw.(json.Number)
	if !ok {
		return &FieldError{Field: "schema_version", Problem: "must be an integer"}
	}
	v, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return &FieldError{Field: "schema_version", Problem: "must be an integer without fraction or exponent"}
	}
	if err != nil || v != Version {
		return fmt.Errorf("%w: schema_version %s (this build knows %d)", ErrUnknownVersion, n, Version)
	}
	return nil
}
