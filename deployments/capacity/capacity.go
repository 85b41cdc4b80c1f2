package capacity

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInvalid is wrapped by every error Plan returns.
var ErrInvalid = errors.New("invalid workload")

// Workload is what a deployment has to carry.
type Workload struct {
	// RPS is the rate of new requests per second. Required.
	RPS float64
	// PersonaTime is the mean duration of one attempt. Required.
	PersonaTime time.Duration
	// RetryRate is the mean number of extra attempts per request: 0.2 means
	// 1.2 attempts per request. Default: 0.
	RetryRate float64
	// OutputSize is the mean persona answer in bytes. Default: 0.
	OutputSize int
	// QuarantineRate is the share of requests that end quarantined.
	// Default: 0.01.
	QuarantineRate float64
	// Slots is the concurrency of one replica (persona concurrency).
	// Default: 64.
	Slots int
	// LedgerTTL is how long a step's ledger entry outlives its last update
	// (redis.ttl). Default: 168h.
	LedgerTTL time.Duration
	// OutcomesMaxAge is how long terminal records are kept. Default: 168h.
	OutcomesMaxAge time.Duration
	// AttemptsMaxAge is how long attempt events are kept (in memory).
	// Default: 24h.
	AttemptsMaxAge time.Duration
	// AttemptsMaxBytes caps each attempt events stream (one per JetStream
	// cluster, a copy on each of its servers): past it the oldest events
	// go, so at high rates they are kept less than AttemptsMaxAge.
	// Default: 256 MiB.
	AttemptsMaxBytes int64
	// QuarantineDays is how many days of quarantine records are kept (the
	// stream has no age limit: purge keeps it bounded). Default: 30.
	QuarantineDays float64
}

// Figures are the measured costs a Plan is built from.
type Figures struct {
	// ReplicaCPUPerAttempt is a replica's CPU per attempt.
	ReplicaCPUPerAttempt time.Duration
	// ReplicaBytesPerSlot is a replica's memory per request in flight, and
	// ReplicaBaseBytes its memory with nothing in flight.
	ReplicaBytesPerSlot, ReplicaBaseBytes float64
	// SlotEfficiency is the share of a slot's time spent in the handler
	// (fetch, settle and the outcome publish take the rest).
	SlotEfficiency float64
	// ClusterRPS is the request lifecycles per second one R3 JetStream
	// cluster (sync_interval always) sustains.
	ClusterRPS float64
	// NATSCPUPerRequest is the JetStream servers' CPU per request (all
	// three of an R3 cluster together).
	NATSCPUPerRequest time.Duration
	// RedisCPUPerAttempt is redis-server's CPU per attempt (begin, finish,
	// lease renewals).
	RedisCPUPerAttempt time.Duration
	// RedisBytesPerStep is Redis memory per task-step kept.
	RedisBytesPerStep float64
	// Stored sizes in bytes: a stored request, a terminal record
	// without its output, a quarantine record, an attempt event, a
	// quarantine index entry.
	RequestBytes, RecordBytes, QuarantineBytes, EventBytes, IndexBytes float64
	// InlineOutputMax is the largest output kept inside the terminal
	// record; larger ones go to the outputs object store.
	InlineOutputMax int
	// RedisMasterBytes is the most ledger data one Redis master should hold.
	RedisMasterBytes float64
	// Utilisation is the share of a core, a cluster or a Redis master a
	// plan fills, leaving the rest as headroom.
	Utilisation float64
}

// Measured are the figures of deployments/CAPACITY.md (2 shared vCPUs,
// nats-server 2.15.2, redis-server 7.0.15), each rounded up.
var Measured = Figures{
	ReplicaCPUPerAttempt: 1200 * time.Microsecond,
	ReplicaBytesPerSlot:  10 << 10,
	ReplicaBaseBytes:     64 << 20,
	SlotEfficiency:       0.72,
	ClusterRPS:           1800,
	NATSCPUPerRequest:    1400 * time.Microsecond,
	RedisCPUPerAttempt:   100 * time.Microsecond,
	RedisBytesPerStep:    1300,
	RequestBytes:         590,
	RecordBytes:          700,
	QuarantineBytes:      1750,
	EventBytes:           410,
	IndexBytes:           170,
	InlineOutputMax:      64 << 10,
	RedisMasterBytes:     16 << 30,
	Utilisation:          0.7,
}

// ackedKept is how long the requests stream keeps a request after its
// ack: the runtime purges each persona's requests every second up to the
// consumer's ack floor as read a second earlier (consumers/trim.go). A
// request much slower than the others holds the floor back, and the
// requests acknowledged after it stay until it ends: the model assumes
// attempts of about the same length.
const ackedKept = 2 * time.Second

// streamReplicas is the copies every stream keeps on an R3 cluster.
const streamReplicas = 3

// outputRefBytes is what a terminal record holds instead of an output that
// went to the object store.
const outputRefBytes = 200

const day = 24 * time.Hour

// Plan is what a Workload needs, with every count rounded up.
type Plan struct {
	// Workload is the input with its defaults applied.
	Workload Workload `json:"workload"`
	// AttemptsPerSecond is RPS × (1 + RetryRate).
	AttemptsPerSecond float64 `json:"attempts_per_second"`
	// InFlight is the attempts running at any moment (Little's law).
	InFlight float64 `json:"in_flight"`
	// Replicas of `personaq serve`, each with Workload.Slots slots, at
	// least two; ReplicaCores and ReplicaMemory are each one's share.
	Replicas      int     `json:"replicas"`
	ReplicaCores  float64 `json:"replica_cores"`
	ReplicaMemory float64 `json:"replica_memory_bytes"`
	// NATSClusters is how many R3 JetStream clusters (regions or request
	// streams split by persona) carry the rate; NATSCores their CPU in all.
	NATSClusters int     `json:"nats_clusters"`
	NATSCores    float64 `json:"nats_cores"`
	// RedisMasters (each with a replica) and the ledger's memory in all.
	RedisMasters int     `json:"redis_masters"`
	RedisCores   float64 `json:"redis_cores"`
	RedisMemory  float64 `json:"redis_memory_bytes"`
	// Storage on the JetStream servers, all three copies.
	Storage Storage `json:"storage"`
}

// Storage is bytes on the JetStream servers (R3: three copies).
type Storage struct {
	// RequestsBacklog is the requests stream at steady state: the requests
	// in flight, and those acknowledged within ackedKept (the stream keeps
	// an acknowledged request until the next purge passes it).
	RequestsBacklog float64 `json:"requests_backlog_bytes"`
	// Outcomes are terminal records kept for OutcomesMaxAge; Outputs the
	// object store's large outputs for as long.
	Outcomes float64 `json:"outcomes_bytes"`
	Outputs  float64 `json:"outputs_bytes"`
	// Quarantine is QuarantineDays of records and their index entries.
	Quarantine float64 `json:"quarantine_bytes"`
	// AttemptsMemory is the attempt events held in memory: AttemptsMaxAge
	// of them, or the streams' byte caps when those are reached first.
	AttemptsMemory float64 `json:"attempts_memory_bytes"`
	// AttemptsKept is how long an attempt event is kept: AttemptsMaxAge,
	// or less when the byte caps push events out first.
	AttemptsKept time.Duration `json:"attempts_kept_ns"`
	// PerMillionPerDay is one copy of what a million requests a day add
	// per day kept: terminal record, output, quarantine, attempt events.
	PerMillionPerDay float64 `json:"per_million_per_day_bytes"`
}

// Plan returns what w needs according to f.
func (f Figures) Plan(w Workload) (Plan, error) {
	w = w.withDefaults()
	if err := w.validate(); err != nil {
		return Plan{}, err
	}
	p := Plan{Workload: w, AttemptsPerSecond: w.RPS * (1 + w.RetryRate)}
	p.InFlight = p.AttemptsPerSecond * w.PersonaTime.Seconds()
	f.replicas(&p)
	f.servers(&p)
	p.Storage = f.storage(w, p.InFlight)
	capAttempts(&p)
	return p, nil
}

func (f Figures) replicas(p *Plan) {
	cores := p.AttemptsPerSecond * f.ReplicaCPUPerAttempt.Seconds() / f.Utilisation
	bySlots := ceil(p.InFlight / f.SlotEfficiency / float64(p.Workload.Slots))
	p.Replicas = max(bySlots, ceil(cores), 2)
	p.ReplicaCores = cores / float64(p.Replicas)
	p.ReplicaMemory = f.ReplicaBaseBytes + float64(p.Workload.Slots)*f.ReplicaBytesPerSlot
}

func (f Figures) servers(p *Plan) {
	a := p.AttemptsPerSecond
	p.NATSClusters = max(ceil(a/(f.ClusterRPS*f.Utilisation)), 1)
	p.NATSCores = a * f.NATSCPUPerRequest.Seconds() / f.Utilisation
	p.RedisCores = a * f.RedisCPUPerAttempt.Seconds() / f.Utilisation
	p.RedisMemory = p.Workload.RPS * p.Workload.LedgerTTL.Seconds() * f.RedisBytesPerStep
	p.RedisMasters = max(ceil(p.RedisCores), ceil(p.RedisMemory/f.RedisMasterBytes), 1)
}

func (f Figures) storage(w Workload, inFlight float64) Storage {
	record, output := f.RecordBytes+float64(w.OutputSize), 0.0
	if w.OutputSize > f.InlineOutputMax {
		record, output = f.RecordBytes+outputRefBytes, float64(w.OutputSize)
	}
	quarantine := w.QuarantineRate * (f.QuarantineBytes + f.IndexBytes)
	// Every attempt has a started event, every failed one a failed event.
	events := (1 + 2*w.RetryRate + w.QuarantineRate) * f.EventBytes
	perDay := w.RPS * day.Seconds() * streamReplicas
	return Storage{
		RequestsBacklog:  (inFlight + w.RPS*ackedKept.Seconds()) * f.RequestBytes * streamReplicas,
		Outcomes:         perDay * record * w.OutcomesMaxAge.Seconds() / day.Seconds(),
		Outputs:          perDay * output * w.OutcomesMaxAge.Seconds() / day.Seconds(),
		Quarantine:       perDay * quarantine * w.QuarantineDays,
		AttemptsMemory:   perDay * events * w.AttemptsMaxAge.Seconds() / day.Seconds(),
		PerMillionPerDay: 1e6 * (record + output + quarantine + events),
	}
}

// capAttempts holds the attempt events to the streams' byte caps: one
// stream per JetStream cluster, a copy on each of its servers.
func capAttempts(p *Plan) {
	s, w := &p.Storage, p.Workload
	s.AttemptsKept = w.AttemptsMaxAge
	limit := float64(w.AttemptsMaxBytes) * streamReplicas * float64(p.NATSClusters)
	if s.AttemptsMemory > limit {
		s.AttemptsKept = time.Duration(float64(w.AttemptsMaxAge) * limit / s.AttemptsMemory).Round(time.Second)
		s.AttemptsMemory = limit
	}
}

func ceil(x float64) int { return int(math.Ceil(x - 1e-9)) }

func (w Workload) withDefaults() Workload {
	if w.QuarantineRate == 0 {
		w.QuarantineRate = 0.01
	}
	if w.Slots == 0 {
		w.Slots = 64
	}
	if w.LedgerTTL == 0 {
		w.LedgerTTL = 7 * day
	}
	if w.OutcomesMaxAge == 0 {
		w.OutcomesMaxAge = 7 * day
	}
	if w.QuarantineDays == 0 {
		w.QuarantineDays = 30
	}
	if w.AttemptsMaxAge == 0 {
		w.AttemptsMaxAge = day
	}
	if w.AttemptsMaxBytes == 0 {
		w.AttemptsMaxBytes = 256 << 20
	}
	return w
}

func (w Workload) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: "+format, append([]any{ErrInvalid, field}, args...)...))
	}
	if !(w.RPS > 0) || math.IsInf(w.RPS, 0) {
		bad("rps", "must be a positive number, got %v", w.RPS)
	}
	if w.PersonaTime <= 0 {
		bad("persona_time", "must be positive, got %s", w.PersonaTime)
	}
	if !(w.RetryRate >= 0) {
		bad("retry_rate", "must not be negative, got %v", w.RetryRate)
	}
	if w.OutputSize < 0 {
		bad("output_size", "must not be negative, got %d", w.OutputSize)
	}
	if !(w.QuarantineRate > 0 && w.QuarantineRate <= 1) {
		bad("quarantine_rate", "must be in (0, 1], got %v", w.QuarantineRate)
	}
	for _, c := range []struct {
		field    string
		negative bool
	}{
		{"slots", w.Slots < 0}, {"ledger_ttl", w.LedgerTTL < 0},
		{"outcomes_max_age", w.OutcomesMaxAge < 0}, {"quarantine_days", w.QuarantineDays < 0},
		{"attempts_max_age", w.AttemptsMaxAge < 0}, {"attempts_max_bytes", w.AttemptsMaxBytes < 0},
	} {
		if c.negative {
			bad(c.field, "must not be negative")
		}
	}
	return errors.Join(errs...)
}
