package containers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	natsmod "github.com/testcontainers/testcontainers-go/modules/nats"
	"github.com/testcontainers/testcontainers-go/wait"
)

// NATSOptions configures StartNATS.
type NATSOptions struct {
	// Image to run. Default: ResolveImages's NATS image.
	Image string
	// Network to join. Default: none; the server is then reachable only
	// through URL.
	Network *Network
	// Alias on Network, and the server name. Default: "nats".
	Alias string
	// Config is appended to the generated server configuration (which sets
	// listen, http, server_name and the jetstream block). Default: none.
	Config string
	// StopTimeout is how long Stop waits after SIGTERM. Default: 30s.
	StopTimeout time.Duration
	// ReadyTimeout bounds the wait for JetStream to be healthy after each
	// start. Default: 60s.
	ReadyTimeout time.Duration
}

// NATS is a nats-server container with JetStream on file storage: a named
// volume at /data, sync_interval always (every write fsynced before it is
// acknowledged), so a restart, even after SIGKILL, keeps every stream,
// consumer and acknowledged message.
type NATS struct {
	Node
	clientPort, monitorPort string
	readyTimeout            time.Duration
}

// natsConfig is the server configuration StartNATS writes.
const natsConfig = `server_name: %q
listen: "0.0.0.0:4222"
http: "0.0.0.0:8222"
jetstream {
  store_dir: "/data"
  # fsync every write before acknowledging it (an R1 server
  # otherwise loses acknowledged writes on a crash).
  sync_interval: always
}
%s
`

// StartNATS starts a JetStream server and waits until it is healthy.
func StartNATS(ctx context.Context, opts NATSOptions) (*NATS, error) {
	if opts.Alias == "" {
		opts.Alias = "nats"
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	if opts.Image == "" {
		im, err := ResolveImages(ctx)
		if err != nil && im.NATS == "" {
			return nil, err
		}
		opts.Image = im.NATS
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	n := &NATS{clientPort: ports[0], monitorPort: ports[1], readyTimeout: opts.ReadyTimeout}
	n.alias, n.stopTimeout = opts.Alias, opts.StopTimeout
	n.volume = "personaq-nats-" + randomHex(6)
	if err := createVolume(ctx, n.volume); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(natsConfig, opts.Alias, opts.Config)
	custom := []testcontainers.ContainerCustomizer{
		// Replaces the module's "-DV -js": no per-message tracing; the file
		// enables JetStream.
		testcontainers.WithCmd("-c", "/etc/nats.conf"),
		testcontainers.WithFiles(testcontainers.ContainerFile{
			Reader: strings.NewReader(cfg), ContainerFilePath: "/etc/nats.conf", FileMode: 0o644,
		}),
		testcontainers.WithMounts(testcontainers.VolumeMount(n.volume, "/data")),
		testcontainers.WithLabels(map[string]string{Label: "true"}),
		testcontainers.WithHostConfigModifier(bindLoopback(map[string]string{"4222/tcp": ports[0], "6222/tcp": "", "8222/tcp": ports[1]})),
		testcontainers.WithWaitStrategy(wait.ForHTTP("/healthz").WithPort("8222/tcp").
			WithStartupTimeout(opts.ReadyTimeout).WithPollInterval(100 * time.Millisecond)),
	}
	if opts.Network != nil {
		addr, join, err := opts.Network.join(opts.Alias, true)
		if err != nil {
			return nil, err
		}
		n.addr = addr
		custom = append(custom, join...)
	}
	ctr, err := natsmod.Run(ctx, opts.Image, custom...)
	if ctr != nil {
		n.ctr = ctr
	}
	if err != nil {
		if ctr != nil {
			_ = n.Terminate(context.WithoutCancel(ctx))
		} else {
			removeVolume(context.WithoutCancel(ctx), n.volume)
		}
		return nil, fmt.Errorf("start nats (%s): %w", opts.Image, err)
	}
	n.started()
	return n, nil
}

// URL is the client URL from the host: nats://127.0.0.1:PORT, the same
// port across restarts, so clients reconnect.
func (n *NATS) URL() string { return "nats://127.0.0.1:" + n.clientPort }

// MonitorURL is the monitoring endpoint from the host.
func (n *NATS) MonitorURL() string { return "http://127.0.0.1:" + n.monitorPort }

// InternalURL is the client URL from containers on the network.
func (n *NATS) InternalURL() string { return "nats://" + n.alias + ":4222" }

// Start starts the stopped server and waits until JetStream is healthy.
func (n *NATS) Start(ctx context.Context) error {
	if err := n.start(ctx); err != nil {
		return err
	}
	return n.WaitReady(ctx)
}

// Restart stops the server (SIGTERM), waits down, starts it again and
// waits until JetStream is healthy.
func (n *NATS) Restart(ctx context.Context, down time.Duration) error {
	if err := n.Stop(ctx); err != nil {
		return err
	}
	if err := sleep(ctx, down); err != nil {
		return err
	}
	return n.Start(ctx)
}

// WaitReady polls /healthz (JetStream included) until it answers 200.
func (n *NATS) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.readyTimeout)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.MonitorURL()+"/healthz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("nats %s not healthy within %s: %w", n.alias, n.readyTimeout, err)
		}
	}
}

// bindLoopback publishes each container port on 127.0.0.1 at the given
// host port.
func bindLoopback(ports map[string]string) func(*container.HostConfig) {
	return func(hc *container.HostConfig) {
		if hc.PortBindings == nil {
			hc.PortBindings = network.PortMap{}
		}
		for cport, hport := range ports {
			hc.PortBindings[network.MustParsePort(cport)] = []network.PortBinding{
				{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: hport},
			}
		}
	}
}

func freePorts(n int) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for len(out) < n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
