package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// --input that is not JSON says where it goes wrong.
func TestInputThatIsNotJSONSaysWhere(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ in, want string }{
		"SecondLine":    {"{\n  \"work_ms\": 200,\n}", "not valid JSON at line 3, column 1: invalid character '}' looking for beginning of object key string"},
		"FirstLine":     {`{"a": tru}`, "not valid JSON at line 1, column 10: invalid character '}' in literal true (expecting 'e')"},
		"Truncated":     {`{"a": [1, 2`, "not valid JSON at line 1, column 11: unexpected end of JSON input"},
		"AfterTheValue": {`{"a": 1} x`, "not valid JSON at line 1, column 10: invalid character 'x' after top-level value"},
		"NotJSONAtAll":  {`hello`, "not valid JSON at line 1, column 1: invalid character 'h' looking for beginning of value"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := readInput(tc.in, strings.NewReader(""))
			require.Error(t, err)
			require.Equal(t, "invalid flag --input: "+tc.want, err.Error())
		})
	}
}
