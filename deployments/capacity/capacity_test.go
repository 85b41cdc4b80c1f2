package capacity_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/deployments/capacity"
)

// round are figures that make the arithmetic checkable by hand.
var round = capacity.Figures{
	ReplicaCPUPerAttempt: time.Millisecond, ReplicaBytesPerSlot: 1000, ReplicaBaseBytes: 1e6,
	SlotEfficiency: 0.5, ClusterRPS: 1000, NATSCPUPerRequest: time.Millisecond,
	RedisCPUPerAttempt: 100 * time.Microsecond, RedisBytesPerStep: 1000,
	RequestBytes: 500, RecordBytes: 600, QuarantineBytes: 1900, EventBytes: 400, IndexBytes: 100,
	InlineOutputMax: 10_000, RedisMasterBytes: 1e9, Utilisation: 0.5,
}

func TestPlan(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	base := capacity.Workload{
		RPS: 100, PersonaTime: 10 * time.Second, RetryRate: 0.5, OutputSize: 400,
		QuarantineRate: 0.1, Slots: 100, LedgerTTL: day, OutcomesMaxAge: day, QuarantineDays: 1,
		AttemptsMaxAge: day, AttemptsMaxBytes: 1e12, // no cap reached but where a case sets one
	}
	with := func(mod func(*capacity.Workload)) capacity.Workload {
		w := base
		mod(&w)
		return w
	}
	tests := []struct {
		name string
		w    capacity.Workload
		want func(p *capacity.Plan)
	}{{
		// 150 attempts/s × 10 s = 1500 in flight, and 200 requests acked
		// within the trimmer's 2 s still stored; at 50% slot efficiency
		// 3000 slots = 30 replicas of 100. Redis keeps 100/s × 1 day of
		// steps at 1000 B: 8.64 GB, nine masters of 1 GB.
		name: "ByHand",
		w:    base,
		want: func(p *capacity.Plan) {},
	}, {
		name: "CPUBoundReplicas", // 1 ms per attempt at 50%: 6 cores for 3000 attempts/s
		w:    with(func(w *capacity.Workload) { w.RPS = 2000; w.PersonaTime = time.Millisecond }),
		want: func(p *capacity.Plan) {
			p.Workload.RPS, p.Workload.PersonaTime = 2000, time.Millisecond
			p.AttemptsPerSecond, p.InFlight = 3000, 3
			p.Replicas, p.ReplicaCores = 6, 1
			p.NATSClusters, p.NATSCores, p.RedisCores, p.RedisMasters = 6, 6, 0.6, 173
			p.RedisMemory = 2000 * 86400 * 1000
			p.Storage = capacity.Storage{
				RequestsBacklog: (3 + 2000*2) * 500 * 3, Outcomes: 2000 * 86400 * 3 * 1000, Quarantine: 2000 * 86400 * 3 * 200,
				AttemptsMemory: 2000 * 86400 * 3 * 840, AttemptsKept: day, PerMillionPerDay: 2.04e9,
			}
		},
	}, {
		// 2.17728e10 bytes of events a day against 3 copies of a 1 GB cap:
		// the cap is held, and an event is kept 3e9/2.17728e10 of a day.
		name: "AttemptEventsHeldToTheirCap",
		w:    with(func(w *capacity.Workload) { w.AttemptsMaxBytes = 1e9 }),
		want: func(p *capacity.Plan) {
			p.Workload.AttemptsMaxBytes = 1e9
			p.Storage.AttemptsMemory = 3e9
			p.Storage.AttemptsKept = 11905 * time.Second // 86400 s × 3e9 / 2.17728e10, to the second
		},
	}, {
		name: "LargeOutputGoesToTheObjectStore",
		w:    with(func(w *capacity.Workload) { w.OutputSize = 20_000 }),
		want: func(p *capacity.Plan) {
			p.Workload.OutputSize = 20_000
			p.Storage.Outcomes = 25_920_000 * 800 // the record keeps a reference
			p.Storage.Outputs = 25_920_000 * 20_000
			p.Storage.PerMillionPerDay = 1e6 * (800 + 20_000 + 200 + 840)
		},
	}, {
		name: "AtLeastTwoReplicasOneClusterOneMaster",
		w:    with(func(w *capacity.Workload) { w.RPS = 0.01; w.LedgerTTL = time.Hour }),
		want: func(p *capacity.Plan) {
			p.Workload.RPS, p.Workload.LedgerTTL = 0.01, time.Hour
			p.AttemptsPerSecond, p.InFlight = 0.015, 0.15
			p.Replicas, p.ReplicaCores = 2, 0.015*0.002/2
			p.NATSClusters, p.NATSCores, p.RedisCores, p.RedisMasters = 1, 0.00003, 0.000003, 1
			p.RedisMemory = 0.01 * 3600 * 1000
			p.Storage = capacity.Storage{
				RequestsBacklog: (0.15 + 0.01*2) * 1500, Outcomes: 2592 * 1000, Quarantine: 2592 * 200,
				AttemptsMemory: 2592 * 840, AttemptsKept: day, PerMillionPerDay: 2.04e9,
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := capacity.Plan{
				Workload: base, AttemptsPerSecond: 150, InFlight: 1500,
				Replicas: 30, ReplicaCores: 0.3 / 30, ReplicaMemory: 1.1e6,
				NATSClusters: 1, NATSCores: 0.3, RedisMasters: 9, RedisCores: 0.03, RedisMemory: 8.64e9,
				Storage: capacity.Storage{
					RequestsBacklog: (1500 + 100*2) * 1500, Outcomes: 2.592e10, Quarantine: 5.184e9,
					AttemptsMemory: 2.17728e10, AttemptsKept: day, PerMillionPerDay: 2.04e9,
				},
			}
			tt.want(&want)
			got, err := round.Plan(tt.w)
			require.NoError(t, err)
			require.Empty(t, cmp.Diff(want, got, cmpopts.EquateApprox(1e-9, 1e-12)))
		})
	}
}

func TestPlanDefaults(t *testing.T) {
	t.Parallel()
	p, err := capacity.Measured.Plan(capacity.Workload{RPS: 10, PersonaTime: time.Minute})
	require.NoError(t, err)
	require.Equal(t, capacity.Workload{
		RPS: 10, PersonaTime: time.Minute, QuarantineRate: 0.01, Slots: 64,
		LedgerTTL: 168 * time.Hour, OutcomesMaxAge: 168 * time.Hour, QuarantineDays: 30, AttemptsMaxAge: 24 * time.Hour,
		AttemptsMaxBytes: 256 << 20,
	}, p.Workload)
	require.Equal(t, 14, p.Replicas, "600 in flight at 72%% efficiency: 834 slots of 64")
}

func TestPlanRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		w     capacity.Workload
		field string
	}{
		{"NoRate", capacity.Workload{PersonaTime: time.Second}, "rps"},
		{"NoPersonaTime", capacity.Workload{RPS: 1}, "persona_time"},
		{"NegativeRetryRate", capacity.Workload{RPS: 1, PersonaTime: time.Second, RetryRate: -1}, "retry_rate"},
		{"NegativeOutput", capacity.Workload{RPS: 1, PersonaTime: time.Second, OutputSize: -1}, "output_size"},
		{"QuarantineOverOne", capacity.Workload{RPS: 1, PersonaTime: time.Second, QuarantineRate: 2}, "quarantine_rate"},
		{"NegativeSlots", capacity.Workload{RPS: 1, PersonaTime: time.Second, Slots: -1}, "slots"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := capacity.Measured.Plan(tt.w)
			require.True(t, errors.Is(err, capacity.ErrInvalid), "%v", err)
			require.ErrorContains(t, err, "invalid workload: "+tt.field+":")
		})
	}
}

// TestPlanGrowsWithLoad: more work never needs fewer of anything.
func TestPlanGrowsWithLoad(t *testing.T) {
	t.Parallel()
	prev := capacity.Plan{}
	for _, rps := range []float64{1, 10, 100, 1e3, 1e4, 1e5} {
		p, err := capacity.Measured.Plan(capacity.Workload{RPS: rps, PersonaTime: 30 * time.Second, RetryRate: 0.2, OutputSize: 4096})
		require.NoError(t, err)
		require.GreaterOrEqual(t, p.Replicas, prev.Replicas)
		require.GreaterOrEqual(t, p.NATSClusters, prev.NATSClusters)
		require.GreaterOrEqual(t, p.RedisMasters, prev.RedisMasters)
		require.Greater(t, p.Storage.Outcomes, prev.Storage.Outcomes)
		prev = p
	}
}
