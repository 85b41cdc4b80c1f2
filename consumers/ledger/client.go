package ledger

import (
	"github.com/redis/go-redis/v9"

	"github.com/personaq/personaq/consumers/rdb"
)

// Timeouts of a client made by NewClient: rdb's (a call against a stopped
// server fails with ErrUnavailable within about 2 s).
const (
	DialTimeout = rdb.DialTimeout
	IOTimeout   = rdb.IOTimeout
	MaxRetries  = rdb.MaxRetries
)

// NewClient is rdb.NewClient: the client the ledger and the flow stores
// share, with bounded timeouts.
func NewClient(o *redis.UniversalOptions) redis.UniversalClient { return rdb.NewClient(o) }

// NewClientURL is rdb.NewClientURL.
func NewClientURL(url string) (redis.UniversalClient, error) { return rdb.NewClientURL(url) }

// Universal is rdb.Universal.
func Universal(p *redis.Options) *redis.UniversalOptions { return rdb.Universal(p) }
