package cli

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/personaq/personaq/cmd/metrics"
	"github.com/personaq/personaq/consumers"
)

// metricsFlag adds --metrics-addr to a command that runs a replica.
func metricsFlag(fs *pflag.FlagSet, addr *string) {
	fs.StringVar(addr, "metrics-addr", "", `listen address for /metrics, /healthz and /readyz, e.g. ":9090" (default: off)`)
}

// metricsEndpoint is a replica's Prometheus registry and probe server; a
// nil *metricsEndpoint (no --metrics-addr) does nothing.
type metricsEndpoint struct {
	addr string
	reg  registry
	obs  *metrics.Metrics
	rt   atomic.Pointer[consumers.Runtime]
}

// registry is where a replica's collectors go and what /metrics serves.
type registry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// newMetricsEndpoint returns nil when addr is empty.
func newMetricsEndpoint(addr string) *metricsEndpoint {
	if addr == "" {
		return nil
	}
	return newMetricsOn(addr, prometheus.NewRegistry())
}

// newMetricsOn registers on reg every collector a replica exports: the
// runtime's Observer, and the backlog and ledger state read at each
// scrape once the runtime runs (the dashboards and alert rules in
// deployments/ are checked against this list).
func newMetricsOn(addr string, reg registry) *metricsEndpoint {
	e := &metricsEndpoint{addr: addr, reg: reg, obs: metrics.New(reg)}
	reg.MustRegister(metrics.NewRuntimeCollector(func() metrics.RuntimeState {
		if rt := e.rt.Load(); rt != nil {
			return rt
		}
		return nil
	}, 2*time.Second))
	return e
}

// observer is the runtime's consumers.Config.Observer (nil: none).
func (e *metricsEndpoint) observer() consumers.Observer {
	if e == nil {
		return nil
	}
	return e.obs
}

// start listens on the address and serves until ctx ends; the returned
// stop shuts the server down (call it after the runtime has drained, so
// /readyz says "not ready" during the drain rather than refusing).
func (e *metricsEndpoint) start(ctx context.Context, nc *nats.Conn, rt *consumers.Runtime, log zerolog.Logger) (stop func(), err error) {
	if e == nil {
		return func() {}, nil
	}
	e.rt.Store(rt)
	srv, err := metrics.NewServer(metrics.ServerConfig{Addr: e.addr, Gatherer: e.reg, NATS: nc, Runtime: rt})
	if err != nil {
		return nil, err
	}
	if err := srv.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	log.Info().Str("addr", srv.Addr().String()).Msg("serving /metrics, /healthz and /readyz")
	return func() { _ = srv.Shutdown(context.Background()) }, nil
}
