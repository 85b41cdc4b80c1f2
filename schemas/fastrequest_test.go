package schemas_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

// request is a minimal valid request with fields (each `"key":value`)
// added, or put in place of the base field with the same key.
func request(fields ...string) string {
	base := []string{`"schema_version":1`, `"request_id":"r"`, `"task_id":"t"`, `"step":"s"`,
		`"persona":"p"`, `"created_at":"2025-01-01T00:00:00Z"`}
	for _, f := range fields {
		key := f[:strings.Index(f, ":")+1]
		i := 0
		for i < len(base) && !strings.HasPrefix(base[i], key) {
			i++
		}
		if i == len(base) {
			base = append(base, f)
		} else {
			base[i] = f
		}
	}
	return "{" + strings.Join(base, ",") + "}"
}

func nested(depth int) string {
	return strings.Repeat(`{"a":[`, depth) + "1" + strings.Repeat("]}", depth)
}

func items(n int, item string) string {
	return "[" + strings.Repeat(item+",", n-1) + item + "]"
}

// fastRequestCases say which requests the fast path takes (fast) and, for
// some, the request_id it must decode; every case must also be answered
// exactly as the full path answers it.
var fastRequestCases = []struct {
	name, json string
	fast       bool
	requestID  string
}{
	{"escapes", request(`"request_id":"a\"b\\c\/d\b\f\n\r\t"`), true, "a\"b\\c/d\b\f\n\r\t"},
	{"unicode escapes", request(`"request_id":"\u0041\u00e9\u20AC"`), true, "Aé€"},
	{"html escapes", request(`"request_id":"\u003cb\u003e \u0026"`), true, "<b> &"},
	{"nul escape", request(`"request_id":"\u0000"`), true, "\x00"},
	{"surrogate pair", request(`"request_id":"\ud83d\ude00"`), true, "😀"},
	{"surrogate pair upper", request(`"request_id":"x\uD83D\uDE00y"`), true, "x😀y"},
	{"raw utf-8", request(`"request_id":"é😀"`), true, "é😀"},
	{"escaped token", request(`"task_id":"\u0041"`), true, "r"},
	{"escaped token not a token", request(`"task_id":"\u002e"`), false, ""},
	{"lone high surrogate", request(`"request_id":"\ud83d"`), false, ""},
	{"reversed pair", request(`"request_id":"\ude00\ud83d"`), false, ""},
	{"high then not low", request(`"request_id":"\ud83d\u0041"`), false, ""},
	{"bad escape", request(`"request_id":"\x"`), false, ""},
	{"bad hex", request(`"request_id":"\u00g0"`), false, ""},
	{"single quote escape", request(`"request_id":"\'"`), false, ""},
	{"raw tab", request("\"request_id\":\"a\tb\""), false, ""},
	{"escaped non_retryable", request(`"policy_overrides":{"non_retryable":["\u0041rr","B\n"]}`), true, "r"},
	{"escaped correlation", request(`"correlation_id":"\u00e9\/\u003e"`), true, "r"},

	{"agents", request(`"agents":{"primary":"a","fallback":"b"}`), true, "r"},
	{"agents primary only", request(`"agents":{"primary":"\u00e9"}`), true, "r"},
	{"agents empty", request(`"agents":{}`), false, ""},
	{"agents fallback only", request(`"agents":{"fallback":"b"}`), false, ""},
	{"agents unknown", request(`"agents":{"primary":"a","x":1}`), false, ""},
	{"overrides", request(`"policy_overrides":{"max_attempts":3,"attempt_timeout_ms":5,"backoff_ms":[0,1],"non_retryable":["E"]}`), true, "r"},
	{"overrides queue wait", request(`"policy_overrides":{"queue_wait_ms":250}`), true, "r"},
	{"overrides queue wait zero", request(`"policy_overrides":{"queue_wait_ms":0}`), false, ""},
	{"overrides empty", request(`"policy_overrides":{}`), true, "r"},
	{"overrides empty arrays", request(`"policy_overrides":{"backoff_ms":[],"non_retryable":[ ]}`), true, "r"},
	{"overrides 100 items", request(`"policy_overrides":{"backoff_ms":` + items(100, "7") + `}`), true, "r"},
	{"overrides 101 items", request(`"policy_overrides":{"backoff_ms":` + items(101, "7") + `}`), false, ""},
	{"overrides trailing comma", request(`"policy_overrides":{"backoff_ms":[1,]}`), false, ""},
	{"budget", request(`"budget":{"max_tokens":0,"max_cost_usd":0}`), true, "r"},
	{"budget tiny cost", request(`"budget":{"max_cost_usd":1e-400}`), true, "r"},
	{"budget tiny negative cost", request(`"budget":{"max_cost_usd":-1e-400}`), false, ""},
	{"budget huge cost", request(`"budget":{"max_cost_usd":1e400}`), false, ""},
	{"budget cost exponent", request(`"budget":{"max_cost_usd":1E2}`), true, "r"},
	{"budget cost tenth", request(`"budget":{"max_cost_usd":0.1}`), true, "r"},
	{"budget cost 15 digits", request(`"budget":{"max_cost_usd":123456789.012345}`), true, "r"},
	{"budget cost 16 digits", request(`"budget":{"max_cost_usd":1234567890.123456}`), true, "r"},
	{"budget cost 1e22", request(`"budget":{"max_cost_usd":9.99e22}`), true, "r"},
	{"budget cost 1e23", request(`"budget":{"max_cost_usd":1e23}`), true, "r"},
	{"budget cost small", request(`"budget":{"max_cost_usd":0.3e-22}`), true, "r"},
	{"budget cost long exponent", request(`"budget":{"max_cost_usd":1e00001}`), true, "r"},
	{"budget cost leading zeros", request(`"budget":{"max_cost_usd":0.000000000000001}`), true, "r"},
	{"input nested", request(`"input":{"a":{"b":[1,{"c":[]},{},"\u00e9",-1.5e+10,true,false,null]}}`), true, "r"},
	{"input spaced", request(`"input": { "a" : [ 1 , 2 ] } `), true, "r"},
	{"input string", request(`"input":"\ud83d\ude00\n"`), true, "r"},
	{"input duplicate keys", request(`"input":{"a":1,"a":2}`), true, "r"},
	{"input unknown keys", request(`"input":{"Persona":1,"\u0061":2}`), true, "r"},
	{"input leading zero", request(`"input":01`), false, ""},
	{"input bare dot", request(`"input":1.`), false, ""},
	{"input bare minus", request(`"input":-`), false, ""},
	{"input plus", request(`"input":+1`), false, ""},
	{"input trailing comma", request(`"input":{"a":1,}`), false, ""},
	{"input key only", request(`"input":{"a"}`), false, ""},
	{"input missing comma", request(`"input":[1 2]`), false, ""},
	{"input mismatched", request(`"input":[1}`), false, ""},
	{"input tru", request(`"input":tru`), false, ""},
	{"input bad escape", request(`"input":"\q"`), false, ""},
	{"input number key", request(`"input":{1:2}`), false, ""},

	{"progress max", request(`"progress_total":2147483647`), true, "r"},
	{"progress over", request(`"progress_total":2147483648`), false, ""},
	{"progress negative", request(`"progress_total":-1`), false, ""},
	{"progress minus zero", request(`"progress_total":-0`), true, "r"},
	{"progress fraction", request(`"progress_total":1.0`), false, ""},
	{"progress exponent", request(`"progress_total":1e2`), false, ""},
	{"progress leading zero", request(`"progress_total":01`), false, ""},
	{"tokens 18 digits", request(`"budget":{"max_tokens":999999999999999999}`), true, "r"},
	{"tokens max int64", request(`"budget":{"max_tokens":9223372036854775807}`), false, ""},
	{"tokens over int64", request(`"budget":{"max_tokens":9223372036854775808}`), false, ""},
	{"tokens negative", request(`"budget":{"max_tokens":-5}`), false, ""},
	{"version fraction", request(`"schema_version":1.0`), false, ""},
	{"version negative", request(`"schema_version":-1`), false, ""},
	{"version 2", request(`"schema_version":2`), false, ""},
	{"backoff max", request(`"policy_overrides":{"backoff_ms":[86400000]}`), true, "r"},
	{"backoff over", request(`"policy_overrides":{"backoff_ms":[86400001]}`), false, ""},
	{"backoff negative", request(`"policy_overrides":{"backoff_ms":[-1]}`), false, ""},
	{"attempts over", request(`"policy_overrides":{"max_attempts":101}`), false, ""},

	{"duplicate top", request(`"step":"s"`)[:len(request())-1] + `,"step":"s"}`, false, ""},
	{"duplicate agents key", request(`"agents":{"primary":"a","primary":"a"}`), false, ""},
	{"duplicate budget key", request(`"budget":{"max_tokens":1,"max_tokens":1}`), false, ""},

	{"null id", request(`"request_id":null`), false, ""},
	{"null agents", request(`"agents":null`), false, ""},
	{"null overrides", request(`"policy_overrides":null`), false, ""},
	{"null budget", request(`"budget":null`), false, ""},
	{"null in backoff", request(`"policy_overrides":{"backoff_ms":[null]}`), false, ""},
	{"null created_at", request(`"created_at":null`), false, ""},
	{"null input", request(`"input":null`), true, "r"},
	{"null inside input", request(`"input":{"a":[null]}`), true, "r"},

	{"unknown top", request(`"x":1`), false, ""},
	{"unknown case", request(`"Persona":"p"`), false, ""},
	{"unknown in overrides", request(`"policy_overrides":{"x":1}`), false, ""},
	{"unknown in budget", request(`"budget":{"x":1}`), false, ""},
	{"escaped key", `{"\u0073chema_version":1,"request_id":"r","task_id":"t","step":"s","persona":"p","created_at":"2025-01-01T00:00:00Z"}`, false, ""},

	{"whitespace everywhere", " \t\r\n{ \"schema_version\" :\t1 ,\n\"request_id\"\r: \"r\" , \"task_id\":\"t\",\"step\":\"s\",\"persona\":\"p\",\"created_at\":\"2025-01-01T00:00:00Z\" ,\"agents\" : { \"primary\" : \"a\" } ,\"policy_overrides\":{ \"backoff_ms\" : [ 1 , 2 ] } } \n", true, "r"},
	{"form feed", "\f" + request(), false, ""},
	{"no-break space", "\u00a0" + request(), false, ""},
	{"trailing data", request() + " x", false, ""},
	{"two objects", request() + request(), false, ""},
	{"empty", "", false, ""},

	{"time offset", request(`"created_at":"2025-01-01T00:00:00+01:00"`), true, "r"},
	{"time nanos", request(`"created_at":"2025-01-01T00:00:00.123456789-07:30"`), true, "r"},
	{"time lower z", request(`"created_at":"2025-01-01T00:00:00z"`), false, ""},
	{"time feb 30", request(`"created_at":"2025-02-30T00:00:00Z"`), false, ""},
	{"time escaped", request(`"created_at":"2025-01-01T00:00:00\u005a"`), false, ""},
}

func TestFastRequestCases(t *testing.T) {
	t.Parallel()
	for _, c := range fastRequestCases {
		t.Run(c.name, func(t *testing.T) {
			data := []byte(c.json)
			got, ok := schemas.FastDecodeRequest(data)
			require.Equal(t, c.fast, ok, "%s", data)
			if c.requestID != "" {
				require.Equal(t, c.requestID, got.RequestID)
			}
			requireFastSound(t, data, schemas.FastDecodeRequest, schemas.FullDecodeRequest)
			requireSameAnswer(t, data)
		})
	}
}

// TestFastRequestDeepInput: skip follows nesting without recursion, up to
// a bound beyond which it falls back. (Not fuzz seeds: comparing deeply
// nested JSON by meaning, as checkDecoded does, takes cmp too long.)
func TestFastRequestDeepInput(t *testing.T) {
	t.Parallel()
	for depth, fast := range map[int]bool{120: true, 128: true, 129: false, 5000: false} {
		data := []byte(request(`"input":` + nested(depth)))
		_, ok := schemas.FastDecodeRequest(data)
		require.Equal(t, fast, ok, "depth %d", depth)
		requireFastSound(t, data, schemas.FastDecodeRequest, schemas.FullDecodeRequest)
		requireSameAnswer(t, data)
	}
}

// TestFastRequestEmptySlices: json.Unmarshal makes [] an empty slice, not
// nil, and so must the fast path (reflect.DeepEqual tells them apart).
func TestFastRequestEmptySlices(t *testing.T) {
	t.Parallel()
	got, ok := schemas.FastDecodeRequest([]byte(request(`"policy_overrides":{"backoff_ms":[],"non_retryable":[]}`)))
	require.True(t, ok)
	require.NotNil(t, got.PolicyOverrides.BackoffMs)
	require.NotNil(t, got.PolicyOverrides.NonRetryable)
}

// FuzzFastRequestFields fuzzes the text inside an otherwise valid request,
// where the fast path, not the JSON around it, decides: a string's raw
// contents, input's text, two numbers and a date-time.
func FuzzFastRequestFields(f *testing.F) {
	f.Add(`a\u00e9\ud83d\ude00\n`, `{"a":[1,null,"\/"]}`, `5`, `2.5`, `2025-01-01T00:00:00Z`)
	f.Add(`\uD83D\uDE00`, ` [ ] `, `-0`, `1e-400`, `2025-01-01T00:00:00.5+01:00`)
	for _, c := range fastRequestCases {
		f.Add(c.name, c.json, "0", "0", "2025-01-01T00:00:00Z")
	}
	f.Fuzz(func(t *testing.T, text, input, total, cost, at string) {
		data := []byte(request(`"request_id":"`+text+`"`, `"input":`+input, `"progress_total":`+total,
			`"budget":{"max_cost_usd":`+cost+`}`, `"created_at":"`+at+`"`,
			`"policy_overrides":{"non_retryable":["`+text+`"]}`))
		requireFastSound(t, data, schemas.FastDecodeRequest, schemas.FullDecodeRequest)
		requireSameAnswer(t, data)
	})
}
