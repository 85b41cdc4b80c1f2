package schemas

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaID names one message type's schema.
type schemaID int

const (
	requestSchema schemaID = iota
	outcomeSchema
	quarantineSchema
	compensationSchema
	attemptSchema
	outputChunkSchema
	numSchemas
)

// schemaFiles are the embedded schema files, indexed by schemaID.
var schemaFiles = [numSchemas]string{
	requestSchema:      "json/persona_request.v1.json",
	outcomeSchema:      "json/outcome_event.v1.json",
	quarantineSchema:   "json/quarantine_record.v1.json",
	compensationSchema: "json/compensation_request.v1.json",
	attemptSchema:      "json/attempt_event.v1.json",
	outputChunkSchema:  "json/output_chunk.v1.json",
}

//go:embed json/*.json
var schemaFS embed.FS

// compiled compiles every schema on first use, once per process: compiling
// costs milliseconds, validating microseconds.
var compiled = sync.OnceValues(compileAll)

func schemaFor(id schemaID) (*jsonschema.Schema, error) {
	all, err := compiled()
	if err != nil {
		return nil, err
	}
	return all[id], nil
}

func compileAll() ([numSchemas]*jsonschema.Schema, error) {
	var all [numSchemas]*jsonschema.Schema
	c := newCompiler()
	for id, file := range schemaFiles {
		if err := addResource(c, file); err != nil {
			return all, err
		}
		s, err := c.Compile(file)
		if err != nil {
			return all, fmt.Errorf("schemas: compile %s: %w", file, err)
		}
		all[id] = s
	}
	return all, nil
}

// newCompiler asserts formats and content (both only annotations by default
// in 2020-12) so that "date-time" and base64 payloads are checked, and makes
// "date-time" accept nothing time.Time refuses when unmarshalling: a value
// the schema passes must not fail later in json.Unmarshal.
func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.AssertContent()
	c.RegisterFormat(&jsonschema.Format{Name: "date-time", Validate: validateDateTime})
	return c
}

func addResource(c *jsonschema.Compiler, file string) error {
	raw, err := schemaFS.ReadFile(file)
	if err != nil {
		return fmt.Errorf("schemas: read %s: %w", file, err)
	}
	// UnmarshalJSON keeps numbers exact: a float64 would round the uint64
	// and int64 maximums up past what the Go fields can hold.
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("schemas: parse %s: %w", file, err)
	}
	return c.AddResource(file, doc)
}

// rfc3339 is the shape RFC 3339 requires. time.Time alone is laxer (it
// takes a one-digit hour), the library's check laxer the other way (it takes
// a lowercase "t" and leap seconds, which time.Time refuses).
var rfc3339 = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$`)

// validateDateTime accepts what both RFC 3339 and time.Time accept.
func validateDateTime(v any) error {
	s, ok := v.(string)
	if !ok {
		return nil // "type" reports non-strings
	}
	if !rfc3339.MatchString(s) {
		return errors.New("not an RFC 3339 date-time")
	}
	var t time.Time
	return t.UnmarshalText([]byte(s))
}
