package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/personaq/personaq/cmd/config"
	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/flow"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/retry"
)

func init() { register(newServeCmd) }

func newServeCmd(g *globals) *cobra.Command {
	var path, metricsAddr string
	var memRatio float64
	cmd := &cobra.Command{
		Use:   "serve --config FILE",
		Short: "Run one consumer replica (run several to scale; they share the work)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkMemoryLimitRatio(memRatio); err != nil {
				return err
			}
			cfg, err := config.Load(path, os.LookupEnv)
			if err != nil {
				return err
			}
			if err := cfg.CheckInvokers(); err != nil {
				return err // before any connection: a persona that could never run
			}
			return runServe(cmd, g, cfg, newMetricsEndpoint(metricsAddr), memRatio)
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "personaq.yaml", "configuration file (see deployments/personaq.yaml)")
	metricsFlag(cmd.Flags(), &metricsAddr)
	memoryLimitFlag(cmd.Flags(), &memRatio)
	return cmd
}

func runServe(cmd *cobra.Command, g *globals, cfg *config.File, mx *metricsEndpoint, memRatio float64) error {
	log, err := g.logger()
	if err != nil {
		return err
	}
	restoreMemoryLimit, err := applyMemoryLimit(log, memRatio)
	if err != nil {
		return err
	}
	defer restoreMemoryLimit()
	ctx := cmd.Context()
	led, client, closeLedger, err := serveLedger(ctx, cmd, g, cfg)
	if err != nil {
		return err
	}
	defer closeLedger()
	limiter, circuits, err := flowStores(cfg, client)
	if err != nil {
		return err
	}
	personas, err := cfg.Personas(&log)
	if err != nil {
		return err
	}
	nc, js, err := serveConnect(ctx, cmd, g, cfg, connLogOptions(log)...)
	if err != nil {
		return err
	}
	defer nc.Close()
	rt, err := consumers.New(consumers.Config{
		JetStream: js, Topology: cfg.Topology(), Personas: personas, Ledger: led, Logger: &log,
		DrainTimeout: cfg.Runtime.DrainTimeout.Std(), FetchMaxWait: cfg.Runtime.FetchMaxWait.Std(),
		UnknownPersonaGrace: cfg.Runtime.UnknownPersonaGrace.Std(),
		NoAttemptEvents:     !*cfg.Runtime.AttemptEvents,
		Observer:            mx.observer(),
		Limiter:             limiter, Circuits: circuits,
	})
	if err != nil {
		return err
	}
	stopMetrics, err := mx.start(ctx, nc, rt, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	logStart(log, g.natsURL, cfg, len(personas))
	logBudgets(log, personas)
	if err := rt.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// logStart names the NATS servers serve connected to (the file's, or
// --nats-url / NATS_URL when given).
func logStart(log zerolog.Logger, natsURL string, cfg *config.File, n int) {
	log.Info().Strs("nats", redactAll(strings.Split(natsURL, ","))).Int("personas", n).
		Dur("drain_timeout", cfg.Runtime.DrainTimeout.Std()).Msg("personaq serve starting")
}

// anyStep names the step in the budget lines serve logs at start: any step
// of the persona that runs under its policy without per-request overrides.
const anyStep = "*"

// logBudgets writes each persona's step budget, the two lines a caller
// waiting on a step logs too (retry.LogBudget): how long a step of the
// persona must be given so every retry can run.
func logBudgets(log zerolog.Logger, personas []consumers.Persona) {
	for _, p := range personas {
		retry.LogBudget(log, retry.NewBudget(p.Policy), anyStep)
	}
}

func redactAll(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = config.RedactURL(u)
	}
	return out
}

// serveConnect dials NATS with the config's options; --nats-url / NATS_URL
// given explicitly wins over the file.
func serveConnect(ctx context.Context, cmd *cobra.Command, g *globals, cfg *config.File, extra ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	opts, err := cfg.NATSOptions()
	if err != nil {
		return nil, nil, err
	}
	opts = append(opts, extra...)
	if !cmd.Flags().Changed("nats-url") && os.Getenv("NATS_URL") == "" {
		g.natsURL = cfg.NATS.URL()
	}
	return g.connect(ctx, opts...)
}

// serveLedger requires a real Redis: serve without one would count attempts
// by deliveries and lose plateau detection silently.
func serveLedger(ctx context.Context, cmd *cobra.Command, g *globals, cfg *config.File) (consumers.Ledger, redis.UniversalClient, func(), error) {
	opts, err := cfg.RedisOptions()
	if err != nil {
		return nil, nil, nil, err
	}
	if cmd.Flags().Changed("redis-url") || os.Getenv("REDIS_URL") != "" {
		one, err := redis.ParseURL(g.redisURL)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("invalid flag --redis-url: %w", err)
		}
		opts = &redis.UniversalOptions{Addrs: []string{one.Addr}, Username: one.Username, Password: one.Password, DB: one.DB, TLSConfig: one.TLSConfig}
	}
	if opts == nil {
		return nil, nil, nil, errors.New("serve needs a real Redis for the attempt ledger: set redis.url in the config, PERSONAQ_REDIS_URL, or --redis-url (personaq dev runs without one)")
	}
	client := ledger.NewClient(opts)
	led, err := ledger.New(ledger.Config{Client: client, TTL: cfg.Redis.TTL.Std(), Prefix: cfg.Redis.Prefix})
	if err != nil {
		client.Close()
		return nil, nil, nil, err
	}
	if err := led.Ping(ctx); err != nil {
		client.Close()
		return nil, nil, nil, fmt.Errorf("cannot reach Redis at %v: %w", opts.Addrs, err)
	}
	return led, client, func() { client.Close() }, nil
}

// flowStores builds flow control's shared state on the ledger's Redis: the
// configured rate limiters (nil without any) and the circuit states.
func flowStores(cfg *config.File, client redis.UniversalClient) (*flow.Limiter, *flow.Circuits, error) {
	circuits, err := flow.NewCircuits(client, cfg.Redis.Prefix)
	if err != nil {
		return nil, nil, err
	}
	limits := cfg.Limits()
	if limits == nil {
		return nil, circuits, nil
	}
	limiter, err := flow.NewLimiter(flow.LimiterConfig{Client: client, Prefix: cfg.Redis.Prefix, Limits: limits})
	if err != nil {
		return nil, nil, err
	}
	return limiter, circuits, nil
}
