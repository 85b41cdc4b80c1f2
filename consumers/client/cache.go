package client

import (
	"context"
	"sync"
	"time"

	"github.com/personaq/personaq/consumers/wire"
)

// personaCache keeps what personas' consumers said for a short while: a
// step's budget needs the policy, and reading the consumer on every call
// would cost a round trip per request. Failures are not cached.
type personaCache struct {
	ttl    time.Duration
	mu     sync.Mutex
	byName map[string]cachedPersona
}

type cachedPersona struct {
	info wire.PersonaInfo
	at   time.Time
}

func (c *personaCache) get(ctx context.Context, name string, read func(context.Context) (wire.PersonaInfo, error)) (wire.PersonaInfo, error) {
	if c.ttl > 0 {
		c.mu.Lock()
		e, ok := c.byName[name]
		c.mu.Unlock()
		if ok && time.Since(e.at) < c.ttl {
			return e.info, nil
		}
	}
	info, err := read(ctx)
	if err != nil {
		return info, err
	}
	if c.ttl > 0 {
		c.mu.Lock()
		c.byName[name] = cachedPersona{info: info, at: time.Now()}
		c.mu.Unlock()
	}
	return info, nil
}
