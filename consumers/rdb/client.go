package rdb

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Timeouts of a client made by NewClient, for the fields its options
// leave zero. go-redis's defaults (5 s dial, 3 s read, 3 retries with
// backoff) add up to about 35 s per call against a stopped server; with
// these a call fails with ErrUnavailable within about 2 s, so a worker
// releases its message and the replica reports itself not ready instead
// of holding every slot through an outage.
const (
	DialTimeout = time.Second
	IOTimeout   = time.Second
	MaxRetries  = 1
)

// NewClient returns a Redis client for the ledger: one server, Redis
// Cluster (o.IsClusterMode or several addresses) or Sentinel
// (o.MasterName), as o says, with DialTimeout, IOTimeout and MaxRetries
// where o leaves them zero. o is not modified.
func NewClient(o *redis.UniversalOptions) redis.UniversalClient {
	c := *o
	if c.DialTimeout == 0 {
		c.DialTimeout = DialTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = IOTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = IOTimeout
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = MaxRetries
	}
	return redis.NewUniversalClient(&c)
}

// NewClientURL is NewClient for one server named by a redis:// or
// rediss:// URL (its query parameters apply, as redis.ParseURL reads them).
func NewClientURL(url string) (redis.UniversalClient, error) {
	p, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("%w: redis url: %w", ErrInvalidConfig, err)
	}
	return NewClient(Universal(p)), nil
}

// Universal carries what redis.ParseURL can set over to UniversalOptions.
func Universal(p *redis.Options) *redis.UniversalOptions {
	return &redis.UniversalOptions{
		Addrs: []string{p.Addr}, ClientName: p.ClientName, DB: p.DB, Protocol: p.Protocol,
		Username: p.Username, Password: p.Password,
		MaxRetries: p.MaxRetries, MinRetryBackoff: p.MinRetryBackoff, MaxRetryBackoff: p.MaxRetryBackoff,
		DialTimeout: p.DialTimeout, ReadTimeout: p.ReadTimeout, WriteTimeout: p.WriteTimeout,
		PoolFIFO: p.PoolFIFO, PoolSize: p.PoolSize, PoolTimeout: p.PoolTimeout,
		MinIdleConns: p.MinIdleConns, MaxIdleConns: p.MaxIdleConns, MaxActiveConns: p.MaxActiveConns,
		ConnMaxIdleTime: p.ConnMaxIdleTime, ConnMaxLifetime: p.ConnMaxLifetime,
		TLSConfig: p.TLSConfig,
	}
}
