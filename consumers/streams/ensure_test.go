package streams_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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
	// A byte cap is compared only where personaq sets one (an operator's
	// cap on another stream stays), and with it the discard policy: a
	// stream made before the cap existed (-1, none) is updated.
	capped := want
	capped.MaxBytes, capped.Discard = 1<<20, jetstream.DiscardOld
	for name, tc := range map[string]struct {
		maxBytes int64
		discard  jetstream.DiscardPolicy
		want     bool
	}{
		"SameCap":      {1 << 20, jetstream.DiscardOld, true},
		"NoCapYet":     {-1, jetstream.DiscardOld, false},
		"OtherCap":     {2 << 20, jetstream.DiscardOld, false},
		"OtherDiscard": {1 << 20, jetstream.DiscardNew, false},
	} {
		h := have
		h.MaxBytes, h.Discard = tc.maxBytes, tc.discard
		require.Equal(t, tc.want, streams.Covers(h, capped), name)
	}
	require.True(t, streams.Covers(have, want), "no cap asked: the stream's own (-1) is left")
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

// A stream the server's JetStream limits cannot hold fails with an error
// that says so and names the limit to raise, not only the server's code.
func TestEnsureSaysWhenTheServerHasNoRoom(t *testing.T) {
	t.Parallel()
	opts := &server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir(), JetStreamMaxMemory: 1 << 20, JetStreamMaxStore: 1 << 20,
	}
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	s.Start()
	t.Cleanup(s.Shutdown)
	require.True(t, s.ReadyForConnections(10*time.Second))
	nc, err := nats.Connect(s.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)

	for _, tc := range []struct {
		storage jetstream.StorageType
		limit   string
	}{
		{jetstream.MemoryStorage, "max_memory"},
		{jetstream.FileStorage, "max_file"},
	} {
		name := "ROOM_" + strings.ToUpper(tc.storage.String())
		err := streams.Ensure(context.Background(), js, jetstream.StreamConfig{
			Name: name, Subjects: []string{strings.ToLower(name) + ".>"}, Storage: tc.storage, MaxBytes: 4 << 20,
		})
		require.ErrorIs(t, err, streams.ErrNoRoom, tc.limit)
		require.ErrorContains(t, err, name)
		require.ErrorContains(t, err, "raise the server's JetStream "+tc.limit)
		// The server's own error stays in the chain.
		var api *jetstream.APIError
		require.ErrorAs(t, err, &api)

		// What fits is created as before.
		require.NoError(t, streams.Ensure(context.Background(), js, jetstream.StreamConfig{
			Name: name, Subjects: []string{strings.ToLower(name) + ".>"}, Storage: tc.storage, MaxBytes: 256 << 10,
		}))
	}
}
