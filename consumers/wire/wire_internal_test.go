package wire

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

func TestRequestKey(t *testing.T) {
	t.Parallel()
	require.Equal(t, "0b5f7c1e-9d2a-4c3b-8e6f-1a2b3c4d5e6f", RequestKey("0b5f7c1e-9d2a-4c3b-8e6f-1a2b3c4d5e6f"))
	require.Equal(t, "story_1-plan", RequestKey("story_1-plan"))
	// A dot or a wildcard would split or widen the subject: encoded, and
	// two ids that differ only there keep distinct keys.
	for _, id := range []string{"a.b", "a*", "a>b", "", "~x"} {
		require.Regexp(t, `^~[A-Za-z0-9_-]*$`, RequestKey(id), id)
	}
	require.NotEqual(t, RequestKey("a.b"), RequestKey("a_b"))
	require.NotEqual(t, RequestKey("~x"), "~x")
}

func TestTopologyValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, Topology{}.WithDefaults().Validate())
	for name, bad := range map[string]func(*Topology){
		"Replicas":         func(t *Topology) { t.Replicas = 2 },
		"DuplicateWindow":  func(t *Topology) { t.DuplicateWindow = -time.Second },
		"InlineOutputMax":  func(t *Topology) { t.InlineOutputMax = maxInlineOutput + 1 },
		"OutcomesMaxAge":   func(t *Topology) { t.OutcomesMaxAge = -time.Hour },
		"OutputMaxBytes":   func(t *Topology) { t.Output.MaxBytes = -1 },
		"AttemptsMaxBytes": func(t *Topology) { t.AttemptsMaxBytes = -1 },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			topo := Topology{}.WithDefaults()
			bad(&topo)
			require.ErrorIs(t, topo.Validate(), ErrInvalidConfig)
		})
	}
}

// What a replica writes on its durable consumer is what a client reads
// back: the budget a caller computes is the replicas'.
func TestPersonaInfoRoundTrip(t *testing.T) {
	t.Parallel()
	pol := retry.Policy{Name: "persona", MaxAttempts: 3, AttemptTimeout: 90 * time.Second,
		Schedule: retry.List{Delays: []time.Duration{2 * time.Second, 9 * time.Second}}}
	want := PersonaInfoOf("coder", pol)
	got, err := parsePersonaInfo("coder", want.Metadata())
	require.NoError(t, err)
	require.Equal(t, want, got)

	md := want.Metadata()
	md[metaMaxAttempts] = "0"
	_, err = parsePersonaInfo("coder", md)
	require.Error(t, err)
}

func TestConflictErrorMatchesErrConflict(t *testing.T) {
	t.Parallel()
	var err error = &ConflictError{RequestID: "r", Digest: "a", StoredDigest: "b"}
	require.ErrorIs(t, err, ErrConflict)
	var ce *ConflictError
	require.True(t, errors.As(err, &ce))
	require.Equal(t, "b", ce.StoredDigest)
}
