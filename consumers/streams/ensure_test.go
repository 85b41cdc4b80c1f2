package streams_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/streams"
	"github.com/personaq/personaq/integration/testenv"
)

func TestCovers(t *testing.T) {
	t.Parallel()
	want := jetstream.StreamConfig{Name: "S", Subjects: []string{"b.>", "a.>"}, Retention: jetstream.WorkQueuePolicy,
		Description: "d", MaxAge: time.Hour, Duplicates: time.Minute}
	// What the server answers: our fields, in its order, with its defaults.
	have := want
	have.Subjects, have.Replicas, have.MaxMsgs, have.MaxBytes = []string{"a.>", "b.>"}, 1, -1, -1
	cases := map[string]struct {
		mod  func(*jetstream.StreamConfig)
		want bool
	}{
		"Same":              {func(*jetstream.StreamConfig) {}, true},
		"OtherSubjects":     {func(c *jetstream.StreamConfig) { c.Subjects = []string{"a.>"} }, false},
		"OtherRetention":    {func(c *jetstream.StreamConfig) { c.Retention = jetstream.LimitsPolicy }, false},
		"OtherDescription":  {func(c *jetstream.StreamConfig) { c.Description = "old" }, false},
		"OtherMaxAge":       {func(c *jetstream.StreamConfig) { c.MaxAge = time.Minute }, false},
		"OtherReplicas":     {func(c *jetstream.StreamConfig) { c.Replicas = 3 }, false},
		"OtherStorage":      {func(c *jetstream.StreamConfig) { c.Storage = jetstream.MemoryStorage }, false},
		"OtherDuplicates":   {func(c *jetstream.StreamConfig) { c.Duplicates = 2 * time.Minute }, false},
		"ServerDefaultOnly": {func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = -1 }, true},
	}
	for name, tc := range cases {
		h := have
		h.Subjects = append([]string(nil), have.Subjects...)
		tc.mod(&h)
		require.Equal(t, tc.want, streams.Covers(h, want), name)
	}
}

// A stream already as wanted is not updated again (no config-change
// advisory); a changed field is.
func TestEnsureUpdatesOnlyWhatDiffers(t *testing.T) {
	t.Parallel()
	js := testenv.StartNATS(t).JetStream(t)
	ctx := context.Background()
	updates := make(chan *nats.Msg, 8)
	sub, err := js.Conn().ChanSubscribe("$JS.EVENT.ADVISORY.STREAM.UPDATED.E", updates)
	require.NoError(t, err)
	defer sub.Unsubscribe() //nolint:errcheck // test cleanup
	cfg := jetstream.StreamConfig{Name: "E", Subjects: []string{"e.>"}, Retention: jetstream.WorkQueuePolicy, Duplicates: time.Minute}
	require.NoError(t, streams.Ensure(ctx, js, cfg))
	require.NoError(t, streams.Ensure(ctx, js, cfg))
	require.NoError(t, js.Conn().Flush())
	cfg.Description = "now described"
	require.NoError(t, streams.Ensure(ctx, js, cfg))
	select {
	case <-updates:
	case <-time.After(5 * time.Second):
		t.Fatal("a changed description was not applied")
	}
	s, err := js.Stream(ctx, "E")
	require.NoError(t, err)
	require.Equal(t, "now described", s.CachedInfo().Config.Description)
	require.Empty(t, updates, "only the change was an update")
}
