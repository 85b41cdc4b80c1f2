package schemas_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

// textCases are requests that json.Unmarshal alone accepts after turning
// some of their bytes into U+FFFD: both decode paths must refuse them.
var textCases = map[string]string{
	"RequestIDInvalidBytes":    `{"schema_version":1,"request_id":"r` + "\xff\xfe" + `","task_id":"t","step":"s","persona":"p","created_at":"2025-01-01T00:00:00Z"}`,
	"EscapedStringRawBytes":    `{"schema_version":1,"request_id":"r\n` + "\xff" + `","task_id":"t","step":"s","persona":"p","created_at":"2025-01-01T00:00:00Z"}`,
	"InputStringInvalidBytes":  `{` + minReq + `,"input":{"prompt":"caf` + "\xe9" + `"}}`,
	"InputKeyInvalidBytes":     `{` + minReq + `,"input":{"` + "\xc3" + `":1}}`,
	"CorrelationTruncatedRune": `{` + minReq + `,"correlation_id":"` + "\xe2\x82" + `"}`,
	"SurrogateHalfEncoded":     `{` + minReq + `,"correlation_id":"` + "\xed\xa0\x80" + `"}`,
	"LoneHighSurrogateEscape":  `{"schema_version":1,"request_id":"r\ud800","task_id":"t","step":"s","persona":"p","created_at":"2025-01-01T00:00:00Z"}`,
	"LoneLowSurrogateEscape":   `{` + minReq + `,"input":"\udc00"}`,
	"HighThenNotLow":           `{` + minReq + `,"input":"\ud800\u0041"}`,
	"HighAtEnd":                `{` + minReq + `,"input":"\uD83D"}`,
	"AfterEscapedBackslash":    `{` + minReq + `,"input":"a\\\ud800"}`,
	"PairThenLone":             `{` + minReq + `,"input":"\ud83d\ude00\udc00"}`,
}

func TestDecodeRefusesTextItWouldRepair(t *testing.T) {
	t.Parallel()
	for name, data := range textCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var loose map[string]any
			require.NoError(t, json.Unmarshal([]byte(data), &loose), "encoding/json alone accepts (and repairs) it")
			_, ok := schemas.FastDecodeRequest([]byte(data))
			require.False(t, ok, "fast path")
			for path, decode := range map[string]func([]byte) (*schemas.PersonaRequest, error){
				"full": schemas.FullDecodeRequest, "public": schemas.DecodeRequest,
			} {
				_, err := decode([]byte(data))
				require.ErrorIs(t, err, schemas.ErrInvalid, path)
				var fe *schemas.FieldError
				require.True(t, errors.As(err, &fe), path)
				require.Contains(t, fe.Problem, "not valid UTF-8", path)
			}
		})
	}
}

func TestDecodeKeepsTextThatIsValid(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ data, id string }{
		"SurrogatePair":        {`{"schema_version":1,"request_id":"r\ud83d\ude00","task_id":"t","step":"s","persona":"p","created_at":"2025-01-01T00:00:00Z"}`, "r😀"},
		"ReplacementCharacter": {"{\"schema_version\":1,\"request_id\":\"r\uFFFD\",\"task_id\":\"t\",\"step\":\"s\",\"persona\":\"p\",\"created_at\":\"2025-01-01T00:00:00Z\"}", "r\uFFFD"},
		"EscapedReplacement":   {`{"schema_version":1,"request_id":"r\ufffd","task_id":"t","step":"s","persona":"p","created_at":"2025-01-01T00:00:00Z"}`, "r\uFFFD"},
		"EscapedBackslashU":    {`{"schema_version":1,"request_id":"r\\ud800","task_id":"t","step":"s","persona":"p","created_at":"2025-01-01T00:00:00Z"}`, `r\ud800`},
		"Multibyte":            {`{"schema_version":1,"request_id":"réq-日本","task_id":"t","step":"s","persona":"p","created_at":"2025-01-01T00:00:00Z"}`, "réq-日本"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req, err := schemas.DecodeRequest([]byte(tc.data))
			require.NoError(t, err)
			require.Equal(t, tc.id, req.RequestID)
			full, err := schemas.FullDecodeRequest([]byte(tc.data))
			require.NoError(t, err)
			require.Equal(t, tc.id, full.RequestID)
		})
	}
}

func TestDecodeOutcomeRefusesInvalidUTF8(t *testing.T) {
	t.Parallel()
	data, err := schemas.Encode(validOutcome())
	require.NoError(t, err)
	bad := bytes.Replace(data, []byte(`"boom"`), []byte("\"bo\xffom\""), 1)
	_, ok := schemas.FastDecodeOutcome(bad)
	require.False(t, ok)
	_, err = schemas.DecodeOutcome(bad)
	require.ErrorIs(t, err, schemas.ErrInvalid)
}

// FuzzRequestText: whatever bytes go in, an accepted request holds only
// what its bytes say (no string comes out repaired), and the fast path
// agrees with the full one.
func FuzzRequestText(f *testing.F) {
	for _, s := range textCases {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{` + minReq + `,"input":"\ud83d\ude00 \\ud800"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		requireFastSound(t, data, schemas.FastDecodeRequest, schemas.FullDecodeRequest)
		if _, err := schemas.DecodeRequest(data); err != nil {
			return
		}
		if bytes.Contains(data, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(data), []byte(`\ufffd`)) {
			return // a replacement character the sender wrote itself
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				return
			}
			require.NoError(t, err)
			if s, ok := tok.(string); ok {
				require.False(t, strings.ContainsRune(s, '\uFFFD'), "accepted %q and decoded a repaired string %q", data, s)
			}
		}
	})
}
