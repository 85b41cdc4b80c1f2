package ledger

import (
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Describe names the Redis this ledger reads and writes, without
// credentials: "redis 10.0.0.5:6379 db 0, key prefix personaq", or the
// Cluster's seed addresses. Tools that read the ledger (`task show`, the
// console's task page) say which one they read, so a reader of a ledger
// other than the one the replicas write is not misled by its silence.
func (l *Ledger) Describe() string {
	where := "redis (unknown client)"
	switch c := l.cfg.Client.(type) {
	case *redis.Client:
		o := c.Options()
		where = fmt.Sprintf("redis %s db %d", o.Addr, o.DB)
	case *redis.ClusterClient:
		where = "Redis Cluster " + strings.Join(c.Options().Addrs, ",")
	case *redis.Ring:
		where = "Redis Ring"
	}
	return where + ", key prefix " + l.cfg.Prefix
}
