package consumers

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRawRequestID(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		payload string
		id      string
		ok      bool
	}{
		"First":           {`{"request_id":"r-1","input":{"x":[1,{"request_id":"inner"}]}}`, "r-1", true},
		"AfterNested":     {`{"input":{"request_id":"inner","y":[1,2]},"request_id":"r-2"`, "r-2", true},
		"BrokenAfter":     {`{"request_id":"r-3","input":{`, "r-3", true},
		"InvalidUTF8":     {"{\"request_id\":\"r\xff\"}", "", false},
		"Escaped":         {`{"request_id":"r\u00e9"}`, "", false},
		"NotAString":      {`{"request_id":42}`, "", false},
		"Empty":           {`{"request_id":""}`, "", false},
		"TooLong":         {`{"request_id":"` + strings.Repeat("a", 257) + `"}`, "", false},
		"NotAnObject":     {`["request_id","r"]`, "", false},
		"BrokenBeforeKey": {`{"input":{`, "", false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			id, ok := rawRequestID([]byte(tc.payload))
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.id, id)
		})
	}
}
