package testenv

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestStartRedisCluster(t *testing.T) {
	t.Parallel()
	c := StartRedisCluster(t, 3, 1)
	require.Len(t, c.Nodes, 6)
	ctx := context.Background()
	cc := c.Client(t)
	var masters atomic.Int32 // ForEachMaster calls in parallel
	require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		masters.Add(1)
		return m.Ping(ctx).Err()
	}))
	require.Equal(t, int32(3), masters.Load())

	// Keys of different slots land on different masters; migrating a slot
	// takes its keys along.
	require.NoError(t, cc.Set(ctx, "{a}k", "v", 0).Err())
	slot, err := c.KeySlot(ctx, "{a}k")
	require.NoError(t, err)
	src, err := c.MasterOf(ctx, slot)
	require.NoError(t, err)
	var dst *Redis
	for _, m := range c.masters(ctx) {
		if m != src {
			dst = m
		}
	}
	moved, err := c.MigrateSlot(ctx, slot, dst)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	now, err := c.MasterOf(ctx, slot)
	require.NoError(t, err)
	require.Equal(t, dst, now)
	require.Equal(t, "v", cc.Get(ctx, "{a}k").Val())
}

func TestStartRedisSentinel(t *testing.T) {
	t.Parallel()
	s := StartRedisSentinel(t, 1)
	ctx := context.Background()
	m, err := s.Master(ctx)
	require.NoError(t, err)
	require.Equal(t, s.Data[0], m)
	c := s.Client(t)
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	require.Equal(t, "v", c.Get(ctx, "k").Val())
}
