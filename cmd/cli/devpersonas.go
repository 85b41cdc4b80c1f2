package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
)

// demoPersonas serves the built-in demo handlers under the persona preset
// (plateau under the adaptive one), every delay scaled.
func demoPersonas(scale float64) []consumers.Persona {
	handlersByName := handlers.DemoPersonas()
	out := make([]consumers.Persona, 0, len(demoNames))
	for _, name := range demoNames {
		p := scaledPolicy(retry.PersonaPolicy(60*time.Second), scale)
		if name == "plateau" {
			p = scaledPolicy(retry.AdaptivePolicy(), scale)
		}
		out = append(out, consumers.Persona{Name: name, Handler: handlersByName[name], Policy: p, Concurrency: 8})
	}
	return out
}

// scaledPolicy shrinks a policy's waits by scale, keeping attempt timeouts
// above the demo handlers' 200ms of work.
func scaledPolicy(p retry.Policy, scale float64) retry.Policy {
	s := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	p = p.WithDefaults()
	p.AttemptTimeout = max(s(p.AttemptTimeout), 500*time.Millisecond)
	p.Schedule = retry.Linear{Step: s(retry.DefaultBackoffStep)}
	p.NetworkDelay = s(p.NetworkDelay)
	return p
}

// devLedger connects to --redis-url when given, else starts miniredis.
func devLedger(g *globals) (consumers.Ledger, func(), error) {
	var client redis.UniversalClient
	stop := func() {}
	if g.redisURL != "" {
		var err error
		if client, err = ledger.NewClientURL(g.redisURL); err != nil {
			return nil, nil, fmt.Errorf("invalid flag --redis-url: %w", err)
		}
	} else {
		m, err := startEmbeddedRedis()
		if err != nil {
			return nil, nil, err
		}
		client, stop = ledger.NewClient(&redis.UniversalOptions{Addrs: []string{m.Addr()}}), m.Close
	}
	led, err := ledger.New(ledger.Config{Client: client})
	if err != nil {
		return nil, nil, err
	}
	if err := led.Ping(context.Background()); err != nil {
		return nil, nil, fmt.Errorf("redis at %s: %w", redactURL(g.redisURL), err)
	}
	return led, func() { client.Close(); stop() }, nil
}
