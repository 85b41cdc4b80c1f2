package api

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// problem is an RFC 9457 problem detail; Extra holds its extension
// members (field, scope, limit_bytes, served_personas, request, …).
type problem struct {
	Type   string
	Title  string
	Status int
	Detail string
	Field  string
	Extra  map[string]any
}

// Problem types: urn:personaq:problem:<slug>.
const (
	probUnauthorized   = "unauthorized"
	probForbidden      = "forbidden"
	probInvalidJSON    = "invalid-json"
	probInvalidField   = "invalid-field"
	probTooLarge       = "too-large"
	probUnknownPersona = "unknown-persona"
	probConflict       = "conflict"
	probNotFound       = "not-found"
	probNoOutput       = "no-output"
	probUnavailable    = "unavailable"
	probInvalidQuery   = "invalid-query"
	probMethod         = "method-not-allowed"
)

var problemTitles = map[string]string{
	probUnauthorized: "Unauthorized", probForbidden: "Forbidden", probInvalidJSON: "Invalid JSON",
	probInvalidField: "Invalid field", probTooLarge: "Too large", probUnknownPersona: "Unknown persona",
	probConflict: "Conflict", probNotFound: "Not found", probNoOutput: "No output",
	probUnavailable: "Unavailable", probInvalidQuery: "Invalid query parameter", probMethod: "Method not allowed",
}

func newProblem(status int, slug, detail string) *problem {
	return &problem{Type: "urn:personaq:problem:" + slug, Title: problemTitles[slug], Status: status, Detail: detail}
}

func (p *problem) with(key string, v any) *problem {
	if p.Extra == nil {
		p.Extra = map[string]any{}
	}
	p.Extra[key] = v
	return p
}

func (p *problem) field(name string) *problem { p.Field = name; return p }

func (p *problem) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, 5+len(p.Extra))
	for k, v := range p.Extra {
		m[k] = v
	}
	m["type"], m["title"], m["status"] = p.Type, p.Title, p.Status
	if p.Detail != "" {
		m["detail"] = p.Detail
	}
	if p.Field != "" {
		m["field"] = p.Field
	}
	return json.Marshal(m)
}

// writeProblem answers with p as application/problem+json.
func writeProblem(w http.ResponseWriter, p *problem) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// writeJSON answers with v as application/json.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, newProblem(http.StatusInternalServerError, "internal", err.Error()))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(data)+1))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}
