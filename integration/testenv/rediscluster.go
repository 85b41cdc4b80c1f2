package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterReadyTimeout bounds how long StartRedisCluster and WaitHealthy wait
// for the nodes to agree on the slot map.
const clusterReadyTimeout = 30 * time.Second

// clusterNodeTimeout is the nodes' cluster-node-timeout: a master silent
// this long is failed over by its replica. Short, so tests that kill a
// master take seconds; long enough not to fail over on a busy machine.
const clusterNodeTimeout = 1500 * time.Millisecond

// RedisCluster is a Redis Cluster of real redis-server processes on
// loopback: masters that split the 16384 slots evenly, each with its
// replicas. Roles change when a test fails a master over; ask the cluster
// (Masters, MasterOf) rather than remembering the start-up roles.
type RedisCluster struct {
	// Nodes are every node, the start-up masters first.
	Nodes []*Redis

	ids map[*Redis]string
}

// StartRedisCluster starts masters × (1 + replicas) redis-server processes
// in cluster mode (no persistence), assigns the slots with CLUSTER
// ADDSLOTSRANGE, joins them with CLUSTER MEET, makes the replicas with
// CLUSTER REPLICATE and waits until every node reports the cluster ok. It
// stops them when the test ends. Without redis-server the test is skipped
// (failed when CI is set), as with StartRedis.
func StartRedisCluster(tb testing.TB, masters, replicas int) *RedisCluster {
	tb.Helper()
	if masters < 1 || replicas < 0 {
		tb.Fatalf("testenv: cluster of %d masters with %d replicas each", masters, replicas)
	}
	bin := redisBinary(tb)
	c := &RedisCluster{ids: map[*Redis]string{}}
	for range masters * (1 + replicas) {
		c.Nodes = append(c.Nodes, startRedis(tb, bin, redisSpec{args: clusterArgs()}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	if err := c.form(ctx, masters); err != nil {
		tb.Fatalf("testenv: redis cluster: %v", err)
	}
	c.WaitHealthy(tb)
	return c
}

// clusterArgs turns cluster mode on, with the cluster bus on a free port
// picked once (a restarted node keeps it: its peers know it).
func clusterArgs() func(r *Redis) []string {
	bus := 0
	return func(r *Redis) []string {
		if bus == 0 {
			bus, _ = freePort()
		}
		return []string{
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout.Milliseconds())),
			// A replica may always take over, however long it was cut off.
			"--cluster-replica-validity-factor", "0",
		}
	}
}

// form assigns slots to the first masters nodes, joins every node and makes
// the rest replicas, round robin.
func (c *RedisCluster) form(ctx context.Context, masters int) error {
	for _, n := range c.Nodes {
		id, err := c.admin(n).Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("%s: cluster myid: %w", n.Addr, err)
		}
		c.ids[n] = id
	}
	per := 16384 / masters
	for i, n := range c.Nodes[:masters] {
		lo, hi := i*per, (i+1)*per-1
		if i == masters-1 {
			hi = 16383
		}
		if err := c.admin(n).Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("%s: addslotsrange %d %d: %w", n.Addr, lo, hi, err)
		}
	}
	first := c.Nodes[0]
	host, port, _ := net.SplitHostPort(first.Addr)
	bus := busPort(first)
	for _, n := range c.Nodes[1:] {
		if err := c.admin(n).Do(ctx, "CLUSTER", "MEET", host, port, bus).Err(); err != nil {
			return fmt.Errorf("%s: cluster meet: %w", n.Addr, err)
		}
	}
	if err := c.waitFor(ctx, "every node knows every other", func(ctx context.Context, n *Redis) (bool, error) {
		nodes, err := c.admin(n).ClusterNodes(ctx).Result()
		return strings.Count(nodes, "\n") == len(c.Nodes) && !strings.Contains(nodes, "handshake"), err
	}); err != nil {
		return err
	}
	for i, n := range c.Nodes[masters:] {
		master := c.Nodes[i%masters]
		if err := c.admin(n).Do(ctx, "CLUSTER", "REPLICATE", c.ids[master]).Err(); err != nil {
			return fmt.Errorf("%s: replicate %s: %w", n.Addr, master.Addr, err)
		}
	}
	return nil
}

// busPort is the node's --cluster-port.
func busPort(n *Redis) string {
	args := n.spec.args(n)
	for i, a := range args {
		if a == "--cluster-port" {
			return args[i+1]
		}
	}
	return ""
}

// WaitHealthy waits until every running node reports cluster_state ok and
// the same slot map, and every replica's link to its master is up.
func (c *RedisCluster) WaitHealthy(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	err := waitUntil(ctx, "cluster ok on every node, with one slot map", func() (bool, error) {
		want := ""
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			m, err := c.nodeHealthy(ctx, n)
			if err != nil {
				return false, fmt.Errorf("%s: %w", n.Addr, err)
			}
			if want == "" {
				want = m
			}
			if m != want {
				return false, fmt.Errorf("%s: slot map %s differs from %s", n.Addr, m, want)
			}
		}
		return true, nil
	})
	if err != nil {
		tb.Fatalf("testenv: redis cluster: %v", err)
	}
}

// nodeHealthy returns n's slot map when n reports the cluster ok and, as a
// replica, its link to its master up.
func (c *RedisCluster) nodeHealthy(ctx context.Context, n *Redis) (string, error) {
	info, err := c.admin(n).ClusterInfo(ctx).Result()
	if err != nil {
		return "", err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return "", errors.New("cluster_state not ok")
	}
	repl, err := c.admin(n).Info(ctx, "replication").Result()
	if err != nil {
		return "", err
	}
	if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
		return "", errors.New("replica's link to its master is down")
	}
	return c.slotMap(ctx, n)
}

// slotMap renders n's CLUSTER SHARDS as text to compare: each shard's
// slot ranges, its master and how many online replicas it has.
func (c *RedisCluster) slotMap(ctx context.Context, n *Redis) (string, error) {
	shards, err := c.admin(n).ClusterShards(ctx).Result()
	if err != nil {
		return "", err
	}
	var lines []string
	for _, sh := range shards {
		if len(sh.Slots) == 0 {
			continue
		}
		master, replicas := "", 0
		for _, node := range sh.Nodes {
			switch {
			case node.Role == "master":
				master = node.ID
			case node.Health == "online":
				replicas++
			}
		}
		if master == "" {
			return "", fmt.Errorf("slots %v have no master", sh.Slots)
		}
		lines = append(lines, fmt.Sprintf("%v:%s+%d", sh.Slots, master, replicas))
	}
	slices.Sort(lines)
	return strings.Join(lines, ";"), nil
}

// waitFor polls ok on every running node until it holds on all of them.
func (c *RedisCluster) waitFor(ctx context.Context, what string, ok func(context.Context, *Redis) (bool, error)) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		all := true
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			good, err := ok(ctx, n)
			if err != nil {
				lastErr = fmt.Errorf("%s: %w", n.Addr, err)
			}
			all = all && good
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting until %s: %w (last error: %v)", what, ctx.Err(), lastErr)
		case <-tick.C:
		}
	}
}

// admin is a short-lived-call client of one node (pooled per node).
func (c *RedisCluster) admin(n *Redis) *redis.Client {
	return n.admin()
}

// Addrs are the nodes' host:port, for cluster client seeds.
func (c *RedisCluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// Client returns a cluster client seeded with every node, closed when the
// test ends.
func (c *RedisCluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// ID is n's cluster node id.
func (c *RedisCluster) ID(n *Redis) string { return c.ids[n] }

// Node returns the node whose cluster id is id, or nil.
func (c *RedisCluster) Node(id string) *Redis {
	for n, nid := range c.ids {
		if nid == id {
			return n
		}
	}
	return nil
}

// MasterOf returns the master that serves slot, as the first running node
// that answers sees it.
func (c *RedisCluster) MasterOf(ctx context.Context, slot int) (*Redis, error) {
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		shards, err := c.admin(n).ClusterShards(ctx).Result()
		if err != nil {
			continue
		}
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if int64(slot) < r.Start || int64(slot) > r.End {
					continue
				}
				for _, node := range sh.Nodes {
					if node.Role == "master" {
						return c.Node(node.ID), nil
					}
				}
			}
		}
	}
	return nil, fmt.Errorf("no node serves slot %d", slot)
}

// ReplicaOf returns a running replica of master.
func (c *RedisCluster) ReplicaOf(ctx context.Context, master *Redis) (*Redis, error) {
	for _, n := range c.Nodes {
		if !n.Running() || n == master {
			continue
		}
		info, err := c.admin(n).Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_port:"+strconv.Itoa(master.port)+"\r") {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no running replica of %s", master.Addr)
}

// KeySlot asks the cluster for key's hash slot.
func (c *RedisCluster) KeySlot(ctx context.Context, key string) (int, error) {
	for _, n := range c.Nodes {
		if n.Running() {
			s, err := c.admin(n).ClusterKeySlot(ctx, key).Result()
			return int(s), err
		}
	}
	return 0, fmt.Errorf("no node is running")
}

// MigrateSlot moves slot from its master to dst the way redis-cli
// --cluster reshard does: IMPORTING on dst, MIGRATING on the source, MIGRATE
// of the keys in batches, then SETSLOT NODE on both and every other master.
// Clients see ASK and TRYAGAIN replies meanwhile.
func (c *RedisCluster) MigrateSlot(ctx context.Context, slot int, dst *Redis) (moved int, err error) {
	src, err := c.MasterOf(ctx, slot)
	if err != nil {
		return 0, err
	}
	if src == dst {
		return 0, nil
	}
	if err := c.admin(dst).Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", c.ids[src]).Err(); err != nil {
		return 0, fmt.Errorf("setslot importing: %w", err)
	}
	if err := c.admin(src).Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", c.ids[dst]).Err(); err != nil {
		return 0, fmt.Errorf("setslot migrating: %w", err)
	}
	host, port, _ := net.SplitHostPort(dst.Addr)
	for {
		keys, err := c.admin(src).ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return moved, fmt.Errorf("getkeysinslot: %w", err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := c.admin(src).Do(ctx, args...).Err(); err != nil {
			return moved, fmt.Errorf("migrate: %w", err)
		}
		moved += len(keys)
	}
	// The destination first, so the source's MOVED never points at a node
	// that does not own the slot yet.
	for _, n := range append([]*Redis{dst, src}, c.masters(ctx)...) {
		if err := c.admin(n).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", c.ids[dst]).Err(); err != nil {
			return moved, fmt.Errorf("setslot node on %s: %w", n.Addr, err)
		}
	}
	return moved, nil
}

// masters returns the running nodes that are masters now.
func (c *RedisCluster) masters(ctx context.Context) []*Redis {
	var out []*Redis
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		if role, err := c.admin(n).Do(ctx, "ROLE").Slice(); err == nil && len(role) > 0 && role[0] == "master" {
			out = append(out, n)
		}
	}
	return out
}
