package flow

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// circuitKeyTTL bounds how long a circuit outlives its last change: one
// nobody tends (every replica gone) closes by itself.
const circuitKeyTTL = time.Hour

// Circuits keeps every persona's circuit state in Redis, shared by the
// replicas. It is safe for concurrent use.
type Circuits struct {
	client redis.UniversalClient
	prefix string
	now    func() time.Time
}

// NewCircuits returns the circuit store on client; prefix "" is
// DefaultPrefix.
func NewCircuits(client redis.UniversalClient, prefix string) (*Circuits, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: circuits: client: required", ErrInvalidConfig)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !ValidName(prefix) {
		return nil, fmt.Errorf("%w: circuits: prefix: %q", ErrInvalidConfig, prefix)
	}
	return &Circuits{client: client, prefix: prefix, now: time.Now}, nil
}

func (c *Circuits) key(persona string) []string { return []string{circuitKey(c.prefix, persona)} }

func keyTTL(coolDown time.Duration) int64 { return (coolDown + circuitKeyTTL).Milliseconds() }

// Open opens persona's circuit for coolDown after failures failures within
// the breaker's window. opened is false when it was already open or half-open; st is
// the circuit now.
func (c *Circuits) Open(ctx context.Context, persona string, coolDown time.Duration, failures int) (opened bool, st Status, err error) {
	v, err := openScript.Run(ctx, c.client, c.key(persona), coolDown.Milliseconds(), failures, keyTTL(coolDown)).Slice()
	if err != nil {
		return false, Status{}, redisErrors.Wrap(c.client, "open circuit "+persona, err)
	}
	st = Status{State: parseState(str(v[1])), Until: c.now().Add(ms(v[2])), Failures: int(num(v[3]))}
	return num(v[0]) == 1, st, nil
}

// Probe asks for persona's half-open probe for replica self, claimed for
// claim (another replica may take it over after). granted says self holds
// it; st is the circuit now.
func (c *Circuits) Probe(ctx context.Context, persona, self string, claim, coolDown time.Duration) (granted bool, st Status, err error) {
	v, err := probeScript.Run(ctx, c.client, c.key(persona), self, claim.Milliseconds(), keyTTL(coolDown)).Slice()
	if err != nil {
		return false, Status{}, redisErrors.Wrap(c.client, "probe circuit "+persona, err)
	}
	now := c.now()
	st = Status{State: parseState(str(v[0])), Until: now.Add(ms(v[1])), Failures: int(num(v[2]))}
	if num(v[3]) == 1 {
		st.Prober, st.ProbeUntil = self, now.Add(claim)
		return true, st, nil
	}
	return false, st, nil
}

// Close closes persona's half-open circuit after self's probe succeeded;
// false when self was not its prober.
func (c *Circuits) Close(ctx context.Context, persona, self string) (bool, error) {
	n, err := closeScript.Run(ctx, c.client, c.key(persona), self).Int64()
	if err != nil {
		return false, redisErrors.Wrap(c.client, "close circuit "+persona, err)
	}
	return n == 1, nil
}

// Reopen opens persona's half-open circuit again for coolDown after self's
// probe failed; false when self was not its prober.
func (c *Circuits) Reopen(ctx context.Context, persona, self string, coolDown time.Duration) (bool, Status, error) {
	v, err := reopenScript.Run(ctx, c.client, c.key(persona), self, coolDown.Milliseconds(), keyTTL(coolDown)).Slice()
	if err != nil {
		return false, Status{}, redisErrors.Wrap(c.client, "reopen circuit "+persona, err)
	}
	if num(v[0]) != 1 {
		return false, Status{}, nil
	}
	return true, Status{State: Open, Until: c.now().Add(ms(v[1])), Failures: int(num(v[2]))}, nil
}

// Status reads persona's circuit.
func (c *Circuits) Status(ctx context.Context, persona string) (Status, error) {
	v, err := statusScript.Run(ctx, c.client, c.key(persona)).Slice()
	if err != nil {
		return Status{}, redisErrors.Wrap(c.client, "circuit "+persona, err)
	}
	now := c.now()
	st := Status{State: parseState(str(v[0])), Failures: int(num(v[2])), Prober: str(v[3])}
	if st.State != Closed {
		st.Until = now.Add(ms(v[1]))
	}
	if st.Prober != "" {
		st.ProbeUntil = now.Add(ms(v[4]))
	}
	return st, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) int64 {
	n, _ := v.(int64)
	return n
}

func ms(v any) time.Duration { return time.Duration(num(v)) * time.Millisecond }
