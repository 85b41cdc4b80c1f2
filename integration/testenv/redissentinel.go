package testenv

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name the sentinels of StartRedisSentinel
// monitor.
const SentinelMaster = "personaq"

// sentinelDownAfter is how long a silent master takes to be declared down;
// failover follows within about a second.
const sentinelDownAfter = time.Second

// RedisSentinel is a master, its replicas and three sentinels that monitor
// it (quorum 2), all real redis-server processes on loopback.
type RedisSentinel struct {
	// Data are the data nodes, the start-up master first. Which one is the
	// master now is Master's answer.
	Data []*Redis
	// Sentinels are the three sentinel processes.
	Sentinels []*Redis
}

// StartRedisSentinel starts a master, replicas replicas of it and three
// sentinels, and waits until every sentinel knows the replicas and the other
// sentinels (so a failover can be agreed on). Everything stops when the test
// ends. Without redis-server the test is skipped (failed when CI is set).
func StartRedisSentinel(tb testing.TB, replicas int) *RedisSentinel {
	tb.Helper()
	bin := redisBinary(tb)
	master := startRedis(tb, bin, redisSpec{})
	s := &RedisSentinel{Data: []*Redis{master}}
	host, port := "127.0.0.1", strconv.Itoa(master.port)
	for range replicas {
		s.Data = append(s.Data, startRedis(tb, bin, redisSpec{args: func(*Redis) []string {
			return []string{"--replicaof", host, port}
		}}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	if err := waitUntil(ctx, "the replicas are in sync", func() (bool, error) {
		info, err := master.admin().Info(ctx, "replication").Result()
		return strings.Count(info, ",state=online,") == replicas, err
	}); err != nil {
		tb.Fatalf("testenv: redis sentinel: %v", err)
	}
	conf := fmt.Sprintf("sentinel monitor %s %s %s 2\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\n"+
		"sentinel failover-timeout %[1]s 10000\n", SentinelMaster, host, port, sentinelDownAfter.Milliseconds())
	for range 3 {
		s.Sentinels = append(s.Sentinels, startRedis(tb, bin, redisSpec{conf: conf, args: func(*Redis) []string {
			return []string{"--sentinel"}
		}}))
	}
	if err := waitUntil(ctx, "every sentinel knows the replicas and the other sentinels", func() (bool, error) {
		for _, sn := range s.Sentinels {
			m, err := sn.admin().Do(ctx, "SENTINEL", "MASTER", SentinelMaster).Slice()
			if err != nil {
				return false, err
			}
			f := fields(m)
			if f["num-slaves"] != strconv.Itoa(replicas) || f["num-other-sentinels"] != "2" {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		tb.Fatalf("testenv: redis sentinel: %v", err)
	}
	return s
}

// fields turns a flat [k1 v1 k2 v2 …] reply into a map.
func fields(flat []any) map[string]string {
	out := map[string]string{}
	for i := 0; i+1 < len(flat); i += 2 {
		out[fmt.Sprint(flat[i])] = fmt.Sprint(flat[i+1])
	}
	return out
}

// SentinelAddrs are the sentinels' host:port.
func (s *RedisSentinel) SentinelAddrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		out[i] = n.Addr
	}
	return out
}

// Client returns a failover client (go-redis asks the sentinels for the
// master and follows failovers), closed when the test ends.
func (s *RedisSentinel) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: s.SentinelAddrs()})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Master returns the data node the sentinels name as master now.
func (s *RedisSentinel) Master(ctx context.Context) (*Redis, error) {
	for _, sn := range s.Sentinels {
		addr, err := sn.admin().Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster).StringSlice()
		if err != nil || len(addr) != 2 {
			continue
		}
		for _, d := range s.Data {
			if d.Addr == addr[0]+":"+addr[1] {
				return d, nil
			}
		}
	}
	return nil, fmt.Errorf("no sentinel names a known master")
}

// waitUntil polls ok until it holds or ctx ends.
func waitUntil(ctx context.Context, what string, ok func() (bool, error)) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		good, err := ok()
		if good {
			return nil
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting until %s: %w (last error: %v)", what, ctx.Err(), lastErr)
		case <-tick.C:
		}
	}
}
