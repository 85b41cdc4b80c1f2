package consumers

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/advisory"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

func TestTrimKeep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		floor    uint64
		waiting  []uint64
		kept     uint64
		wantKeep uint64
		wantOK   bool
	}{
		{name: "NothingAcked", floor: 0, wantKeep: 1, wantOK: false},
		{name: "AckedUpToTheFloor", floor: 10, wantKeep: 11, wantOK: true},
		{name: "AlreadyPurgedThere", floor: 10, kept: 11, wantKeep: 11, wantOK: false},
		{name: "FloorMovedOn", floor: 20, kept: 11, wantKeep: 21, wantOK: true},
		{name: "AdvisoryWaitingBelowTheFloor", floor: 10, waiting: []uint64{7, 4}, wantKeep: 4, wantOK: true},
		{name: "AdvisoryOnTheFirstRequest", floor: 10, waiting: []uint64{1}, wantKeep: 1, wantOK: false},
		{name: "AdvisoryAboveTheFloor", floor: 10, waiting: []uint64{15}, wantKeep: 11, wantOK: true},
		{name: "AdvisoryBelowWhatWasKept", floor: 10, waiting: []uint64{3}, kept: 5, wantKeep: 3, wantOK: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keep, ok := trimKeep(tc.floor, tc.waiting, tc.kept)
			require.Equal(t, tc.wantKeep, keep)
			require.Equal(t, tc.wantOK, ok)
		})
	}
}

// The trimmer removes acked requests up to the ack floor it read one pass
// earlier, keeps a request whose MAX_DELIVERIES advisory waits for the
// quarantine listener (and everything after it), and never removes a
// request not yet delivered.
func TestTrimmerKeepsWaitingAdvisoriesAndUnackedRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := testenv.StartNATS(t).JetStream(t)
	topo := Topology{}.WithDefaults()
	require.NoError(t, Provision(ctx, js, topo, []ConsumerSpec{{Persona: "p", AckWait: 5 * time.Second, MaxAckPending: 16}}))
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: schemas.DefaultAdvisoryStream, Subjects: []string{advisory.MaxDeliveriesSubject(topo.RequestsStream)},
		Retention: jetstream.WorkQueuePolicy,
	})
	require.NoError(t, err)
	for range 5 {
		_, err := js.Publish(ctx, topo.RequestSubject("p"), []byte(`{}`))
		require.NoError(t, err)
	}
	c, err := js.Consumer(ctx, topo.RequestsStream, Durable("p"))
	require.NoError(t, err)
	b, err := c.Fetch(5, jetstream.FetchMaxWait(time.Second))
	require.NoError(t, err)
	for m := range b.Messages() {
		require.NoError(t, m.DoubleAck(ctx))
	}
	_, err = js.Publish(ctx, topo.RequestSubject("p"), []byte(`{}`)) // seq 6: never delivered
	require.NoError(t, err)
	adv, _ := json.Marshal(advisory.Advisory{Stream: topo.RequestsStream, Consumer: Durable("p"), StreamSeq: 3, Deliveries: 50})
	_, err = js.Publish(ctx, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."+topo.RequestsStream+"."+Durable("p"), adv)
	require.NoError(t, err)

	r := &Runtime{js: js, topo: topo, personas: map[string]*personaRuntime{"p": nil}, log: zerolog.New(zerolog.NewTestWriter(t))}
	tr := &trimmer{r: r, floor: map[string]uint64{}, kept: map[string]uint64{}}
	tr.pass(ctx)
	require.Equal(t, []uint64{1, 2, 3, 4, 5, 6}, stored(t, js, topo), "the first pass only reads the floor")
	tr.pass(ctx)
	require.Equal(t, []uint64{3, 4, 5, 6}, stored(t, js, topo), "not past the waiting advisory")
	tr.pass(ctx)
	require.Equal(t, []uint64{3, 4, 5, 6}, stored(t, js, topo), "another pass changes nothing")

	as, err := js.Stream(ctx, schemas.DefaultAdvisoryStream)
	require.NoError(t, err)
	require.NoError(t, as.Purge(ctx)) // the listener handled it
	tr.pass(ctx)
	require.Equal(t, []uint64{6}, stored(t, js, topo), "the request never delivered stays")
}

func stored(t *testing.T, js jetstream.JetStream, topo Topology) []uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), topo.RequestsStream)
	require.NoError(t, err)
	var out []uint64
	for seq := uint64(1); seq <= 6; seq++ {
		if _, err := s.GetMsg(context.Background(), seq); err == nil {
			out = append(out, seq)
		}
	}
	return out
}
