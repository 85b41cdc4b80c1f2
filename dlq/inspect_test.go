package dlq_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

// seed stores one record per reason for persona "tester" (tasks t-<reason>)
// plus two terminal records for "planner", and returns their seqs in order.
func (b *bundle) seed() []uint64 {
	b.t.Helper()
	var seqs []uint64
	n := uint64(0)
	for _, r := range schemas.Reasons {
		n++
		seqs = append(seqs, b.put(record(b.t, r, "tester", "t-"+string(r), n)))
	}
	for _, task := range []string{"p1", "p2"} {
		n++
		seqs = append(seqs, b.put(record(b.t, schemas.ReasonTerminal, "planner", task, n)))
	}
	return seqs
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	seqs := b.seed()
	last := seqs[len(seqs)-1]
	cases := []struct {
		name string
		f    dlq.Filter
		want []uint64
	}{
		{"All", dlq.Filter{}, reversed(seqs)},
		{"Reason", dlq.Filter{Reasons: []schemas.Reason{schemas.ReasonTerminal}}, []uint64{last, last - 1, seqs[1]}},
		{"Reasons", dlq.Filter{Reasons: []schemas.Reason{schemas.ReasonExhausted, schemas.ReasonMaxDeliveries}}, []uint64{seqs[6], seqs[0]}},
		{"Persona", dlq.Filter{Persona: "planner"}, []uint64{last, last - 1}},
		{"ReasonAndPersona", dlq.Filter{Reasons: []schemas.Reason{schemas.ReasonTerminal}, Persona: "tester"}, []uint64{seqs[1]}},
		{"Task", dlq.Filter{Task: "p1"}, []uint64{last - 1}},
		{"Limit", dlq.Filter{Limit: 3}, []uint64{last, last - 1, last - 2}},
		{"NoMatch", dlq.Filter{Persona: "nobody"}, nil},
		{"SinceFuture", dlq.Filter{Since: time.Now().Add(time.Hour)}, nil},
		{"SincePast", dlq.Filter{Since: time.Now().Add(-time.Hour), Limit: 1}, []uint64{last}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := b.insp.List(ctx(t), c.f)
			require.NoError(t, err)
			var gotSeqs []uint64
			for _, e := range got {
				require.NotNil(t, e.Record)
				gotSeqs = append(gotSeqs, e.Seq)
			}
			require.Equal(t, c.want, gotSeqs)
		})
	}
}

func reversed(s []uint64) []uint64 {
	out := make([]uint64, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func TestListRejectsBadFilter(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	_, err := b.insp.List(ctx(t), dlq.Filter{Reasons: []schemas.Reason{"nope"}})
	require.ErrorIs(t, err, dlq.ErrInvalidFilter)
	require.ErrorContains(t, err, "max_deliveries", "lists the known reasons")
	_, err = b.insp.List(ctx(t), dlq.Filter{Persona: "a.b"})
	require.ErrorIs(t, err, dlq.ErrInvalidFilter)
}

func TestStats(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	seqs := b.seed()
	st, err := b.insp.Stats(ctx(t))
	require.NoError(t, err)
	require.EqualValues(t, len(seqs), st.Total)
	require.EqualValues(t, 3, st.ByReason["terminal"])
	require.EqualValues(t, 1, st.ByReason["max_deliveries"])
	require.Equal(t, map[string]uint64{"tester": uint64(len(schemas.Reasons)), "planner": 2}, st.ByPersona)
	require.Positive(t, st.Bytes)
	require.Equal(t, seqs[0], st.FirstSeq)
	require.False(t, st.Oldest.IsZero())
	require.GreaterOrEqual(t, st.OldestAge, time.Duration(0))

	n, err := b.insp.Count(ctx(t), dlq.Filter{Reasons: []schemas.Reason{schemas.ReasonTerminal}})
	require.NoError(t, err)
	require.Equal(t, 3, n)
	n, err = b.insp.Count(ctx(t), dlq.Filter{Task: "p2"})
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func TestGet(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	rec := record(t, schemas.ReasonEscalated, "tester", "t1", 1)
	seq := b.put(rec)
	e, err := b.insp.Get(ctx(t), seq)
	require.NoError(t, err)
	require.Equal(t, rec.ID, e.Record.ID)
	require.Equal(t, rec.Errors, e.Record.Errors, "whole error history")
	_, err = b.insp.Get(ctx(t), seq+100)
	require.ErrorIs(t, err, dlq.ErrNotFound)
	require.ErrorContains(t, err, "seq 101")

	_, err = b.insp.Select(ctx(t), dlq.Selection{Seqs: []uint64{seq, 99}})
	require.ErrorIs(t, err, dlq.ErrNotFound)
}

func TestEntryJSONShape(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	seq := b.put(record(t, schemas.ReasonTerminal, "tester", "t1", 1))
	e, err := b.insp.Get(ctx(t), seq)
	require.NoError(t, err)
	data, err := json.Marshal(e)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	require.ElementsMatch(t, []string{"seq", "subject", "stored_at", "size", "record"}, keys(m))
	require.Equal(t, "terminal", m["record"].(map[string]any)["reason"])
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestStreamMissing(t *testing.T) {
	t.Parallel()
	js := testenv.StartNATS(t).JetStream(t)
	insp, err := dlq.NewInspector(dlq.InspectorConfig{JetStream: js})
	require.NoError(t, err)
	_, err = insp.List(ctx(t), dlq.Filter{})
	require.ErrorIs(t, err, dlq.ErrStreamMissing)
	_, err = insp.Stats(ctx(t))
	require.ErrorIs(t, err, dlq.ErrStreamMissing)
	_, err = insp.Get(ctx(t), 1)
	require.ErrorIs(t, err, dlq.ErrStreamMissing)
	_, err = insp.Replay(ctx(t), dlq.Selection{Seqs: []uint64{1}}, dlq.ReplayOptions{})
	require.ErrorIs(t, err, dlq.ErrStreamMissing)
	_, err = insp.Purge(ctx(t), dlq.Selection{}, dlq.PurgeOptions{})
	require.ErrorIs(t, err, dlq.ErrStreamMissing)
}
