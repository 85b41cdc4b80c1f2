package consumers

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// A retry's delay runs from the attempt's end, not from when its ending was
// recorded: what the recording took is taken off, never more than the delay.
func TestWaitLeft(t *testing.T) {
	t.Parallel()
	ended := stageNow
	for _, c := range []struct {
		name  string
		delay time.Duration
		ended time.Time
		now   time.Time
		want  time.Duration
	}{
		{"recorded at once", time.Second, ended, ended, time.Second},
		{"recording took 40ms", time.Second, ended, ended.Add(40 * time.Millisecond), 960 * time.Millisecond},
		{"recording outlasted the delay", 30 * time.Millisecond, ended, ended.Add(40 * time.Millisecond), 0},
		{"no delay", 0, ended, ended.Add(time.Millisecond), 0},
		{"a clock stepped back", time.Second, ended, ended.Add(-time.Second), time.Second},
		{"no end known", time.Second, time.Time{}, ended, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, waitLeft(c.delay, c.ended, c.now))
		})
	}
}

func TestOwnRetries(t *testing.T) {
	t.Parallel()
	d := func(seq, delivered uint64) *transport.Delivery {
		return &transport.Delivery{Stream: "S", Sequence: seq, Delivered: delivered, Connection: 1}
	}
	t.Run("TheNextDeliveryIsTakenOnce", func(t *testing.T) {
		t.Parallel()
		var o ownRetries
		o.note(d(7, 1), time.Second, stageNow)
		require.True(t, o.take(d(7, 2), stageNow.Add(time.Second)))
		require.False(t, o.take(d(7, 2), stageNow.Add(time.Second)), "taken once")
	})
	t.Run("AnotherDeliveryCountIsNot", func(t *testing.T) {
		t.Parallel()
		var o ownRetries
		o.note(d(7, 1), time.Second, stageNow)
		require.False(t, o.take(d(7, 3), stageNow), "a delivery went elsewhere in between")
		require.False(t, o.take(d(7, 2), stageNow), "forgotten by the first take")
	})
	t.Run("AnotherMessageOrStreamIsNot", func(t *testing.T) {
		t.Parallel()
		var o ownRetries
		o.note(d(7, 1), time.Second, stageNow)
		require.False(t, o.take(d(8, 2), stageNow))
		require.False(t, o.take(&transport.Delivery{Stream: "T", Sequence: 7, Delivered: 2}, stageNow))
		require.True(t, o.take(d(7, 2), stageNow))
	})
	t.Run("AfterAReconnectIsNot", func(t *testing.T) {
		t.Parallel()
		var o ownRetries
		o.note(d(7, 1), time.Second, stageNow)
		next := d(7, 2)
		next.Connection = 2
		require.False(t, o.take(next, stageNow), "the server may have restarted on an older state")
	})
	t.Run("AnUnknownConnectionIsNot", func(t *testing.T) {
		t.Parallel()
		var o ownRetries
		first := d(7, 1)
		first.Connection = 0
		o.note(first, time.Second, stageNow)
		next := d(7, 2)
		next.Connection = 0
		require.False(t, o.take(next, stageNow), "a reconnect came between a pull and its delivery")
	})
	t.Run("LateIsNot", func(t *testing.T) {
		t.Parallel()
		var o ownRetries
		o.note(d(7, 1), time.Second, stageNow)
		require.False(t, o.take(d(7, 2), stageNow.Add(time.Second+ownRetryGrace)))
	})
	t.Run("ExpiredAreSwept", func(t *testing.T) {
		t.Parallel()
		var o ownRetries
		o.note(d(7, 1), time.Second, stageNow)
		o.note(d(8, 1), time.Second, stageNow.Add(2*ownRetryGrace))
		require.Len(t, o.m, 1)
	})
	t.Run("Bounded", func(t *testing.T) {
		t.Parallel()
		var o ownRetries
		for i := range ownRetriesMax + 10 {
			o.note(d(uint64(i+1), 1), time.Second, stageNow)
		}
		require.Len(t, o.m, ownRetriesMax)
	})
}

// The delivery that follows one this replica retried starts without a
// redelivery's record lookups; what keeps that safe with a ledger is the
// ledger, which still settles a step completed meanwhile, and a ledger
// that lost the step sends the delivery back to the lookups. Without one,
// a retry remembered on an earlier connection (a reconnect in between:
// the server may have restarted on an older consumer state) is not taken.
func TestOwnRetrySkipsTheRedeliveryLookups(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		noLedger    bool
		noted       uint64 // the delivery count remembered as retried here (0: none)
		reconnected bool   // the successor came on a later connection than the retried delivery
		begun       ledger.Begun
		runs        bool
		reads       int32
		finishes    int
	}{
		{"a redelivery reads its record and is settled by it", false, 0, false, ledger.Begun{Attempt: 2}, false, 1, 0},
		{"the successor of its own retry skips the read", false, 1, false, ledger.Begun{Attempt: 2}, true, 0, 0},
		{"a delivery after one elsewhere reads it", false, 2, false, ledger.Begun{Attempt: 2}, false, 1, 0},
		{"a step the ledger calls done is settled by its record", false, 1, false, ledger.Begun{Done: true}, false, 1, 0},
		{"a ledger that lost the step sends it back to the lookups", false, 1, false, ledger.Begun{Attempt: 1, Fresh: true}, false, 1, 1},
		{"a retry noted before a reconnect is not taken", false, 1, true, ledger.Begun{Attempt: 2}, false, 1, 0},
		{"without a ledger, a redelivery reads its record", true, 0, false, ledger.Begun{}, false, 1, 0},
		{"without a ledger, the successor of its own retry skips the read", true, 1, false, ledger.Begun{}, true, 0, 0},
		{"without a ledger, a delivery after one elsewhere reads it", true, 2, false, ledger.Begun{}, false, 1, 0},
		{"without a ledger, a retry noted before a reconnect is not taken", true, 1, true, ledger.Begun{}, false, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			js, topo, direct := outcomesEnv(t)
			cjs := &failoverJS{JetStream: js}
			fl := &fakeLedger{begun: c.begun}
			var l Ledger = fl
			if c.noLedger {
				l = nil
			}
			r := stageRuntime(t, nil, l)
			r.js, r.topo, r.outcomes = cjs, topo, NewOutcomes(cjs, topo)
			r.dlq = r.newWriter()
			st := stageState(r, 2)
			st.delivery.Connection = 1
			if c.reconnected {
				st.delivery.Connection = 2
			}
			_, done := r.decode(requestMsg(t, nil, nil), st)
			require.False(t, done)
			rec := &schemas.OutcomeEvent{SchemaVersion: schemas.Version, Outcome: schemas.OutcomeSucceeded, Persona: "p",
				RequestID: st.req.RequestID, TaskID: st.req.TaskID, Step: st.req.Step, Attempts: 1, At: time.Now().UTC()}
			_, _, err := direct.create(context.Background(), rec)
			require.NoError(t, err)
			if c.noted > 0 {
				r.retried.note(&transport.Delivery{Stream: "S", Sequence: 7, Delivered: c.noted, Connection: 1}, time.Second, stageNow)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			end, done := r.begin(ctx, st)
			require.Equal(t, !c.runs, done)
			require.Equal(t, c.reads, cjs.reads.Load(), "terminal record reads")
			require.Len(t, fl.finished, c.finishes)
			if !c.runs {
				require.Equal(t, verdictSettled, end.verdict)
				require.Equal(t, schemas.OutcomeSucceeded, end.final.Outcome)
			} else if c.noLedger {
				require.Equal(t, 2, st.attempt.Number, "numbered by its delivery count")
			}
		})
	}
}

// A retry given back is remembered only when this replica serves its
// delay itself, and without a ledger only when the requests stream is
// stored by the standalone server this replica is connected to.
func TestRetryAfterRemembersOnlyHeldRetries(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		ledger bool
		here   bool // the requests stream's server is the one connected to, alone
		delay  time.Duration
		noted  bool
	}{
		{"held, with a ledger", true, false, time.Second, true},
		{"left to the server", true, true, holdUnder + time.Second, false},
		{"without a ledger, its server alone and connected to", false, true, time.Second, true},
		{"without a ledger, left to the server", false, true, holdUnder + time.Second, false},
		{"without a ledger, another server or a cluster", false, false, time.Second, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := stageRuntimeLedger(t, c.ledger)
			js, topo, _ := outcomesEnv(t)
			r.js, r.topo = js, topo
			if !c.here {
				// As when the server is another one than the stream's.
				r.site.known, r.site.connection, r.site.server = true, 1, "another-server"
			}
			st := stageState(r, 1)
			st.delivery.Connection = 1 // the test connection's, never reconnected
			p := stagePolicy()
			st.invoked, st.attempt, st.policy = true, retry.Attempt{Number: 1, At: stageNow}, &p
			require.NoError(t, r.retryAfter(st, c.delay))
			require.Equal(t, c.noted, r.retried.take(&transport.Delivery{Stream: "S", Sequence: 7, Delivered: 2, Connection: 1}, stageNow))
		})
	}
}
