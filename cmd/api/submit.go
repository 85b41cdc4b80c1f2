package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// MaxBodyBytes bounds a request body (413 past it).
const MaxBodyBytes = 1 << 20

// submit is POST /v1/requests: 201 once JetStream stored the request, 200
// for the same request again, 409 for the same id with other content.
func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	req, deadline, prob := decodeSubmit(w, r)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	ctx := r.Context()
	if deadline.IsZero() {
		b, err := s.client.Budget(ctx, req)
		if err != nil {
			s.submitFailed(w, r, req, err)
			return
		}
		deadline = time.Now().Add(b.StepDeadline) // as client.Run computes it
	}
	sub, err := s.client.Submit(ctx, req, client.WithDeadline(deadline))
	if err != nil {
		s.submitFailed(w, r, req, err)
		return
	}
	w.Header().Set("Location", "/v1/requests/"+req.RequestID)
	if !sub.Duplicate {
		s.log.Debug().Str("request_id", req.RequestID).Str("persona", req.Persona).Msg("api: request submitted")
		st := RequestStatus{RequestID: req.RequestID, Status: statusQueued, Persona: req.Persona,
			TaskID: req.TaskID, Step: req.Step, Deadline: deadline.UTC(), CreatedAt: req.CreatedAt}
		s.index.submitted(st)
		writeJSON(w, http.StatusCreated, &st)
		return
	}
	st, err := s.statusOf(ctx, req.RequestID)
	if err != nil { // stored but not seen yet: answer what the first submit did
		st = &RequestStatus{RequestID: req.RequestID, Status: statusQueued, Persona: req.Persona, TaskID: req.TaskID,
			Step: req.Step, Deadline: sub.Deadline.UTC(), CreatedAt: req.CreatedAt}
	}
	writeJSON(w, http.StatusOK, st)
}

// submitFailed answers a refused submit: unknown persona, conflict,
// invalid policy, NATS down.
func (s *Server) submitFailed(w http.ResponseWriter, r *http.Request, req *schemas.PersonaRequest, err error) {
	var ce *client.ConflictError
	switch {
	case errors.As(err, &ce):
		p := newProblem(http.StatusConflict, probConflict, fmt.Sprintf(
			"request_id %s was already submitted with other content (stored digest %s, this one %s)", req.RequestID, ce.StoredDigest, ce.Digest)).field("request_id")
		if st, serr := s.statusOf(r.Context(), req.RequestID); serr == nil {
			p.with("request", st)
		}
		writeProblem(w, p)
	case errors.Is(err, client.ErrUnknownPersona) || errors.Is(err, jetstream.ErrStreamNotFound): // no replica ever ran
		served, _ := s.servedNames(r.Context())
		writeProblem(w, newProblem(http.StatusUnprocessableEntity, probUnknownPersona, fmt.Sprintf(
			"no replica serves persona %q; served: %s", req.Persona, strings.Join(served, ", "))).
			field("persona").with("served_personas", served))
	case errors.Is(err, retry.ErrUnknownPreset):
		writeProblem(w, newProblem(http.StatusBadRequest, probInvalidField, err.Error()).field("policy"))
	case errors.Is(err, retry.ErrInvalidPolicy):
		writeProblem(w, newProblem(http.StatusBadRequest, probInvalidField, err.Error()).field("policy_overrides"))
	default:
		s.fail(w, r, err)
	}
}

// decodeSubmit reads and checks the body: 413 past MaxBodyBytes, 400
// invalid-json saying where, 400 invalid-field naming the field; fills the
// defaults (request_id, step, created_at, schema_version).
func decodeSubmit(w http.ResponseWriter, r *http.Request) (*schemas.PersonaRequest, time.Time, *problem) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, time.Time{}, newProblem(http.StatusRequestEntityTooLarge, probTooLarge,
			fmt.Sprintf("the body is over %d bytes", MaxBodyBytes)).with("limit_bytes", MaxBodyBytes)
	}
	if err != nil {
		return nil, time.Time{}, newProblem(http.StatusBadRequest, probInvalidJSON, "reading the body: "+err.Error())
	}
	fields, prob := decodeObject(body)
	if prob != nil {
		return nil, time.Time{}, prob
	}
	deadline, prob := popDeadline(fields)
	if prob != nil {
		return nil, time.Time{}, prob
	}
	fillDefaults(fields)
	data, _ := json.Marshal(fields)
	req, err := schemas.DecodeRequest(data)
	if err != nil {
		return nil, time.Time{}, requestProblem(err)
	}
	return req, deadline, nil
}

// decodeObject parses body as one JSON object, saying where it is not.
func decodeObject(body []byte) (map[string]json.RawMessage, *problem) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	err := dec.Decode(&fields)
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return nil, newProblem(http.StatusBadRequest, probInvalidJSON, "the body is empty: want a JSON object")
	case errors.As(err, &syn):
		return nil, newProblem(http.StatusBadRequest, probInvalidJSON, where(body, syn.Offset-1)+": "+syn.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, newProblem(http.StatusBadRequest, probInvalidJSON, where(body, int64(len(body)))+": unexpected end of JSON input")
	case errors.As(err, &typ):
		return nil, newProblem(http.StatusBadRequest, probInvalidJSON, "the body is a JSON "+typ.Value+": want an object")
	case err != nil:
		return nil, newProblem(http.StatusBadRequest, probInvalidJSON, err.Error())
	case fields == nil:
		return nil, newProblem(http.StatusBadRequest, probInvalidJSON, "the body is null: want a JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, newProblem(http.StatusBadRequest, probInvalidJSON, where(body, dec.InputOffset())+": data after the JSON object")
	}
	return fields, nil
}

// where says the line, column (both from 1) and byte offset (from 0) of
// the byte at offset in body.
func where(body []byte, offset int64) string {
	offset = min(max(offset, 0), int64(len(body)))
	before := body[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(offset) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d (byte offset %d)", line, col, offset)
}

// popDeadline takes the HTTP-only deadline field out of fields.
func popDeadline(fields map[string]json.RawMessage) (time.Time, *problem) {
	raw, ok := fields["deadline"]
	if !ok {
		return time.Time{}, nil
	}
	delete(fields, "deadline")
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		return time.Time{}, newProblem(http.StatusBadRequest, probInvalidField, "deadline: want an RFC 3339 time string").field("deadline")
	}
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return time.Time{}, newProblem(http.StatusBadRequest, probInvalidField, "deadline: "+err.Error()).field("deadline")
	}
	return t, nil
}

func fillDefaults(fields map[string]json.RawMessage) {
	set := func(k string, v any) {
		if _, ok := fields[k]; !ok {
			fields[k], _ = json.Marshal(v)
		}
	}
	set("request_id", uuid.NewString())
	set("step", "main")
	set("schema_version", schemas.Version)
	set("created_at", time.Now().UTC())
}

// requestProblem turns a schema error into 400 invalid-field (or 413).
func requestProblem(err error) *problem {
	var fe *schemas.FieldError
	switch {
	case errors.Is(err, schemas.ErrTooLarge):
		return newProblem(http.StatusRequestEntityTooLarge, probTooLarge,
			fmt.Sprintf("the request is over the %d-byte message bound", schemas.MaxPayloadBytes)).with("limit_bytes", schemas.MaxPayloadBytes)
	case errors.Is(err, schemas.ErrUnknownVersion):
		return newProblem(http.StatusBadRequest, probInvalidField, err.Error()).field("schema_version")
	case errors.As(err, &fe):
		return newProblem(http.StatusBadRequest, probInvalidField, fe.Field+": "+fe.Problem).field(fe.Field)
	}
	return newProblem(http.StatusBadRequest, probInvalidField, err.Error())
}
