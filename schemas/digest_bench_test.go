package schemas_test

import (
	"encoding/json"
	"testing"

	"github.com/personaq/personaq/schemas"
)

// BenchmarkRequestDigest is the digest every terminal record carries, as
// computed before (a map re-encoding) and now, in one run.
func BenchmarkRequestDigest(b *testing.B) {
	large := validRequest()
	large.Input = json.RawMessage(`{"story":"As a user I want to export my reports","items":[` +
		`{"id":1,"title":"first","tags":["a","b"],"weight":0.5},{"id":2,"title":"second","tags":[],"weight":1e3},` +
		`{"id":3,"title":"third","nested":{"z":true,"y":null,"x":"quote \" and \\ slash"}}],"count":3}`)
	for _, bm := range []struct {
		name string
		req  *schemas.PersonaRequest
	}{
		{"Minimal", schemas.NewRequest("TASK-42", "plan", "planner")},
		{"Full", validRequest()},
		{"LargeInput", large},
		{"Pipeline", pipelineRequest()},
	} {
		for _, impl := range []struct {
			name   string
			digest func(*schemas.PersonaRequest) string
		}{{"Before", schemas.RequestDigestBefore}, {"Now", schemas.RequestDigest}} {
			b.Run(bm.name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_ = impl.digest(bm.req)
				}
			})
		}
	}
}
