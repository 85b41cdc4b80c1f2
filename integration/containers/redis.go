package containers

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	redismod "github.com/testcontainers/testcontainers-go/modules/redis"
	"github.com/testcontainers/testcontainers-go/wait"
)

// RedisOptions configures StartRedis.
type RedisOptions struct {
	// Image to run. Default: ResolveImages's Redis image.
	Image string
	// Network to join. Default: none; the server is then reachable only
	// through URL.
	Network *Network
	// Alias on Network. Default: "redis".
	Alias string
	// Args are added to the server's arguments. Default: none.
	Args []string
	// StopTimeout is how long Stop waits after SIGTERM. Default: 30s.
	StopTimeout time.Duration
	// ReadyTimeout bounds the wait for PING after each start. Default: 30s.
	ReadyTimeout time.Duration
}

// Redis is a redis-server container keeping its data in an append-only
// file fsynced on every write, on a named volume at /data: a stop and start
// (or a SIGKILL) keeps the attempt ledger.
type Redis struct {
	Node
	port         string
	readyTimeout time.Duration
}

// redisArgs replace the image's command. They work with both our image
// (ENTRYPOINT redis-server) and the official one (its entrypoint runs
// redis-server when the first argument is a flag). Replacing the command
// drops our image's --protected-mode no, so it is repeated here
// (integration/images/README.md).
var redisArgs = []string{
	"--bind", "0.0.0.0", "--protected-mode", "no", "--dir", "/data",
	"--save", "", "--appendonly", "yes", "--appendfsync", "always",
}

// StartRedis starts a Redis server and waits until it answers PING.
func StartRedis(ctx context.Context, opts RedisOptions) (*Redis, error) {
	if opts.Alias == "" {
		opts.Alias = "redis"
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	if opts.Image == "" {
		im, err := ResolveImages(ctx)
		if err != nil && im.Redis == "" {
			return nil, err
		}
		opts.Image = im.Redis
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &Redis{port: port, readyTimeout: opts.ReadyTimeout}
	r.alias, r.stopTimeout = opts.Alias, opts.StopTimeout
	r.volume = "personaq-redis-" + randomHex(6)
	if err := createVolume(ctx, r.volume); err != nil {
		return nil, err
	}
	custom := []testcontainers.ContainerCustomizer{
		testcontainers.WithCmd(append(append([]string{}, redisArgs...), opts.Args...)...),
		testcontainers.WithMounts(testcontainers.VolumeMount(r.volume, "/data")),
		testcontainers.WithLabels(map[string]string{Label: "true"}),
		testcontainers.WithHostConfigModifier(bindLoopback(map[string]string{"6379/tcp": port})),
		testcontainers.WithWaitStrategy(wait.ForLog("Ready to accept connections").
			WithStartupTimeout(opts.ReadyTimeout).WithPollInterval(100 * time.Millisecond)),
	}
	if opts.Network != nil {
		addr, join, err := opts.Network.join(opts.Alias, true)
		if err != nil {
			return nil, err
		}
		r.addr = addr
		custom = append(custom, join...)
	}
	ctr, err := redismod.Run(ctx, opts.Image, custom...)
	if ctr != nil {
		r.ctr = ctr
	}
	if err != nil {
		if ctr != nil {
			_ = r.Terminate(context.WithoutCancel(ctx))
		} else {
			removeVolume(context.WithoutCancel(ctx), r.volume)
		}
		return nil, fmt.Errorf("start redis (%s): %w", opts.Image, err)
	}
	r.started()
	if err := r.WaitReady(ctx); err != nil {
		_ = r.Terminate(context.WithoutCancel(ctx))
		return nil, err
	}
	return r, nil
}

// URL is the go-redis URL from the host, the same port across restarts.
func (r *Redis) URL() string { return "redis://127.0.0.1:" + r.port + "/0" }

// Addr is host:port from the host.
func (r *Redis) Addr() string { return "127.0.0.1:" + r.port }

// InternalURL is the URL from containers on the network.
func (r *Redis) InternalURL() string { return "redis://" + r.alias + ":6379/0" }

// Start starts the stopped server and waits until it answers PING.
func (r *Redis) Start(ctx context.Context) error {
	if err := r.start(ctx); err != nil {
		return err
	}
	return r.WaitReady(ctx)
}

// WaitReady polls PING from the host until it answers PONG.
func (r *Redis) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.readyTimeout)
	defer cancel()
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	for {
		if err := c.Ping(ctx).Err(); err == nil {
			return nil
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("redis %s not answering PING within %s: %w", r.alias, r.readyTimeout, err)
		}
	}
}
