package containers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
)

// ReplicaReadyLine is what personaq serve logs once it consumes.
const ReplicaReadyLine = "personaq runtime started"

// ReplicaConfigPath is where StartReplica puts the configuration file.
const ReplicaConfigPath = "/home/nonroot/personaq.yaml"

// ReplicaOptions configures StartReplica.
type ReplicaOptions struct {
	// Image to run. Default: ResolveImages's personaq image.
	Image string
	// Network to join. Required: the replica reaches NATS and Redis by
	// their aliases on it.
	Network *Network
	// Alias on Network, also the replica's name in errors. Required, and
	// unique on the network.
	Alias string
	// Config is the YAML configuration file (see deployments/personaq.yaml);
	// the replica runs `personaq serve --config` on it. Required.
	Config string
	// Env is added to the container's environment; PERSONAQ_LOG_FORMAT
	// defaults to json.
	Env map[string]string
	// ExtraHosts are /etc/hosts entries ("name:ip", or "name:host-gateway"
	// on Docker ≥ 20.10). Default: none.
	ExtraHosts []string
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL; keep
	// it above the config's runtime.drain_timeout. Default: 30s.
	StopTimeout time.Duration
	// ReadyTimeout bounds the wait for ReplicaReadyLine after each start.
	// Default: 60s.
	ReadyTimeout time.Duration
	// Memory is the container's memory limit in bytes (its cgroup's), which
	// serve sets the Go memory limit from. Default: none.
	Memory int64
	// Args are added to `personaq serve --config FILE`. Default: none.
	Args []string
	// Probes runs serve with --metrics-addr :9090 and publishes that port
	// on 127.0.0.1 (see ProbeURL): /metrics, /healthz, /readyz. Default: off.
	Probes bool
}

// probePort is where serve listens for /metrics, /healthz and /readyz.
const probePort = "9090/tcp"

// Replica is one `personaq serve` container.
type Replica struct {
	Node
	readyTimeout time.Duration
}

// StartReplica starts `personaq serve --config` and waits until it logs
// ReplicaReadyLine (streams and its consumers provisioned, fetching).
func StartReplica(ctx context.Context, opts ReplicaOptions) (*Replica, error) {
	switch {
	case opts.Network == nil:
		return nil, errors.New("start replica: network: required")
	case opts.Alias == "":
		return nil, errors.New("start replica: alias: required")
	case opts.Config == "":
		return nil, errors.New("start replica: config: required")
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	if opts.Image == "" {
		im, err := ResolveImages(ctx)
		if err != nil {
			return nil, err
		}
		opts.Image = im.Personaq
	}
	env := map[string]string{"PERSONAQ_LOG_FORMAT": "json"}
	maps.Copy(env, opts.Env)
	r := &Replica{readyTimeout: opts.ReadyTimeout}
	r.alias, r.stopTimeout = opts.Alias, opts.StopTimeout
	if r.stopTimeout == 0 {
		r.stopTimeout = DefaultStopTimeout
	}
	stopSecs := int(r.stopTimeout.Seconds())
	cmd := append([]string{"serve", "--config", ReplicaConfigPath}, opts.Args...)
	var exposed []string
	if opts.Probes {
		cmd = append(cmd, "--metrics-addr", ":9090")
		exposed = []string{probePort}
	}
	req := testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        opts.Image,
			Cmd:          cmd,
			ExposedPorts: exposed,
			Env:          env,
			Files: []testcontainers.ContainerFile{{
				Reader: strings.NewReader(opts.Config), ContainerFilePath: ReplicaConfigPath, FileMode: 0o644,
			}},
			Labels: map[string]string{Label: "true"},
			ConfigModifier: func(c *container.Config) {
				c.StopTimeout = &stopSecs
			},
			HostConfigModifier: func(hc *container.HostConfig) {
				// The network's servers by name, without DNS (see Network).
				hc.ExtraHosts = append(append(hc.ExtraHosts, opts.Network.Hosts()...), opts.ExtraHosts...)
				if opts.Memory > 0 {
					hc.Memory, hc.MemorySwap = opts.Memory, opts.Memory // no swap: the limit is the memory's
				}
				if opts.Probes {
					// A new host port on every start: read ProbeURL again.
					bindLoopback(map[string]string{probePort: ""})(hc)
				}
			},
		},
		Started: true,
	}
	addr, join, err := opts.Network.join(opts.Alias, false)
	if err != nil {
		return nil, err
	}
	r.addr = addr
	for _, c := range join {
		if err := c.Customize(&req); err != nil {
			return nil, err
		}
	}
	ctr, err := testcontainers.GenericContainer(ctx, req)
	if ctr != nil {
		r.ctr = ctr
	}
	if err != nil {
		if ctr != nil {
			_ = r.Terminate(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("start replica %s (%s): %w", opts.Alias, opts.Image, err)
	}
	if err := r.waitLog(ctx, ReplicaReadyLine, r.started(), r.readyTimeout); err != nil {
		_ = r.Terminate(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("start replica: %w", err)
	}
	return r, nil
}

// Start starts the stopped replica and waits until it consumes again.
func (r *Replica) Start(ctx context.Context) error {
	if err := r.start(ctx); err != nil {
		return err
	}
	return r.waitLog(ctx, ReplicaReadyLine, r.Starts(), r.readyTimeout)
}

// Restart stops the replica gracefully (SIGTERM) and starts it again.
func (r *Replica) Restart(ctx context.Context) error {
	if err := r.Stop(ctx); err != nil {
		return err
	}
	return r.Start(ctx)
}

// ProbeURL is the base URL of the replica's /metrics, /healthz and /readyz
// from the host (Probes must be on). The port changes when the replica is
// restarted.
func (r *Replica) ProbeURL(ctx context.Context) (string, error) {
	p, err := r.ctr.MappedPort(ctx, probePort)
	if err != nil {
		return "", fmt.Errorf("probe port of %s: %w", r.alias, err)
	}
	return "http://127.0.0.1:" + p.Port(), nil
}
