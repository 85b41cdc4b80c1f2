package dlq

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// Any header bytes survive the record's JSON: encoded, marshalled,
// unmarshalled and decoded they are the same bytes.
func TestHeaderEncodingRoundTripsAnyBytes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(15, 15))
	for range 500 {
		h := map[string][]string{}
		for range rng.IntN(4) + 1 {
			k := randomText(rng)
			for range rng.IntN(3) + 1 {
				h[k] = append(h[k], randomText(rng))
			}
		}
		raw, err := json.Marshal(encodeHeaders(h))
		require.NoError(t, err)
		require.True(t, utf8.Valid(raw))
		var stored map[string][]string
		require.NoError(t, json.Unmarshal(raw, &stored))
		got, err := decodeHeaders(stored)
		require.NoError(t, err)
		require.Equal(t, nats.Header(h), got)
	}
}

func randomText(rng *rand.Rand) string {
	switch rng.IntN(4) {
	case 0:
		return HeaderBase64Prefix + "x"
	case 1:
		return "plain-" + strings.Repeat("é", rng.IntN(3))
	}
	b := make([]byte, rng.IntN(12))
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return string(b)
}

func TestEncodedHeadersReadableWhenValid(t *testing.T) {
	t.Parallel()
	got := encodeHeaders(map[string][]string{"A": {"héllo"}, "B": {"\xff"}})
	require.Equal(t, []string{"héllo"}, got["A"])
	require.Equal(t, []string{HeaderBase64Prefix + "/w=="}, got["B"])
	_, err := decodeHeaders(map[string][]string{"C": {HeaderBase64Prefix + "!!"}})
	require.ErrorIs(t, err, ErrPayloadCorrupt)
}

func TestClipKeepsRunesWhole(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("日", 400)
	require.Equal(t, maxField, utf8.RuneCountInString(clipRunes(s, maxField)))
	require.True(t, utf8.ValidString(clipRunes("a\xffb", 10)))
	c := clipText(strings.Repeat("é", 10_000), 1000)
	require.LessOrEqual(t, len(c), 1000)
	require.True(t, utf8.ValidString(c))
	require.True(t, strings.HasSuffix(c, "bytes]"), c)
}
