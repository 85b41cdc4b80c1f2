package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/personaq/personaq/cmd/console"
	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/schemas"
)

func init() { register(newDevCmd) }

type devFlags struct {
	dataDir    string
	listen     string
	once       bool
	timeScale  float64
	perPersona int
	timeout    time.Duration
	metrics    string
	console    string
}

func newDevCmd(g *globals) *cobra.Command {
	var f devFlags
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything in one process: embedded NATS JetStream, demo personas, a sample workload and a live summary",
		Long: `dev starts an in-process NATS server with JetStream, an in-process Redis-protocol
server for the attempt ledger (unless --redis-url names a real one), a consumer
serving six demo personas (echo succeeds, flaky succeeds on attempt 3, terminal
fails for good, slowpoke times out every time, plateau stalls at 5/9 across two
agents, validator is corrected by feedback), publishes a sample workload and
prints each outcome as it happens. Delays are scaled by --time-scale.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.timeScale <= 0 || f.timeScale > 1 {
				return fmt.Errorf("invalid flag --time-scale: %g (want 0 < scale ≤ 1)", f.timeScale)
			}
			if f.perPersona < 0 {
				return fmt.Errorf("invalid flag --per-persona: %d (want ≥ 0)", f.perPersona)
			}
			return runDev(cmd.Context(), g, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", ".personaq", "JetStream storage directory")
	fl.StringVar(&f.listen, "listen", "", "host:port for the embedded NATS server (default: a free loopback port)")
	fl.BoolVar(&f.once, "once", false, "exit when the sample workload has settled, printing a final table")
	fl.Float64Var(&f.timeScale, "time-scale", 0.01, "scale for demo timeouts and backoffs (1 = the real persona timeouts and backoffs)")
	fl.IntVar(&f.perPersona, "per-persona", 2, "sample requests published per demo persona (0: just serve)")
	fl.DurationVar(&f.timeout, "settle-timeout", 2*time.Minute, "with --once: fail if the workload has not settled by then")
	metricsFlag(fl, &f.metrics)
	fl.StringVar(&f.console, "console", console.DefaultListen, `host:port for the web console (a free port if taken; "" : off)`)
	return cmd
}

func runDev(ctx context.Context, g *globals, f devFlags) error {
	log, err := g.logger()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.dataDir, 0o755); err != nil {
		return fmt.Errorf("invalid flag --data-dir: %w", err)
	}
	ns, err := startEmbeddedNATS(f.dataDir, f.listen)
	if err != nil {
		return err
	}
	defer ns.Shutdown()
	g.natsURL = ns.ClientURL()
	nc, js, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	if g.redisURL == "" {
		m, err := startEmbeddedRedis()
		if err != nil {
			return err
		}
		defer m.Close()
		g.redisURL = "redis://" + m.Addr() + "/0"
		if err := announceDevLedger(ctx, js, g.redisURL); err != nil {
			return err
		}
	}
	led, closeLedger, err := devLedger(g)
	if err != nil {
		return err
	}
	defer closeLedger()
	logDevBudgets(log, f.timeScale)
	mx := newMetricsEndpoint(f.metrics)
	rt, err := consumers.New(consumers.Config{
		JetStream: js, Personas: demoPersonas(f.timeScale), Ledger: led, Logger: &log,
		DrainTimeout: 5 * time.Second, FetchMaxWait: 250 * time.Millisecond, Observer: mx.observer(),
	})
	if err != nil {
		return err
	}
	stopMetrics, err := mx.start(ctx, nc, rt, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	// Provisioned before the console and API are announced, so a caller
	// reading "API at …" finds the demo personas served.
	if err := rt.Provision(ctx); err != nil {
		return err
	}
	stopConsole, err := serveDevConsole(ctx, g, f.console, js, led, log)
	if err != nil {
		return err
	}
	defer stopConsole()
	return devSession(ctx, g, f, ns, js, rt, log)
}

// devSession runs the runtime, publishes the workload and reports outcomes.
func devSession(ctx context.Context, g *globals, f devFlags, ns *server.Server, js jetstream.JetStream, rt *consumers.Runtime, log zerolog.Logger) error {
	if err := rt.Provision(ctx); err != nil {
		return err
	}
	events, err := watchOutcomes(ctx, js)
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- rt.Run(runCtx) }()

	sum := newDevSummary(g.stdout)
	if err := publishWorkload(ctx, js, f.perPersona, sum); err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "personaq dev: NATS at %s — published %d requests; outcomes:\n", ns.ClientURL(), sum.total())
	err = sum.follow(ctx, events, f)
	stop()
	if runErr := <-done; runErr != nil && !errors.Is(runErr, context.Canceled) {
		log.Warn().Err(runErr).Msg("runtime stopped with an error")
	}
	sum.table()
	return err
}

// publishWorkload publishes perPersona requests for every demo persona.
func publishWorkload(ctx context.Context, js jetstream.JetStream, perPersona int, sum *devSummary) error {
	run := time.Now().UTC().Format("150405")
	for _, name := range demoNames {
		for i := 1; i <= perPersona; i++ {
			req := schemas.NewRequest(fmt.Sprintf("demo-%s-%s-%d", name, run, i), "main", name)
			req.Agents = schemas.Agents{Primary: "agent-a"}
			if name == "plateau" {
				req.Agents.Fallback, req.ProgressTotal = "agent-b", 9
			}
			if err := publishTraced(ctx, js, req); err != nil {
				return err
			}
			sum.expect(req)
		}
	}
	return nil
}
