package containers

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
)

// Network is a user-defined bridge network the containers of one test
// share. Its subnet is chosen here (a free /24 in 10.128.0.0/9), so every
// container gets a fixed address that survives a stop and start, and its
// servers are published to replicas as /etc/hosts entries (see Hosts): a
// replica never asks a DNS server for "nats" or "redis", not even Docker's
// upstream one while a server is stopped.
type Network struct {
	// Name of the Docker network (random).
	Name string
	// Gateway is the host's address on the network: a server the test runs
	// on the host and binds to Gateway is reachable from every container on
	// the network, and from nowhere else.
	Gateway string

	net    *testcontainers.DockerNetwork
	subnet netip.Prefix

	mu    sync.Mutex
	next  int               // last host number handed out
	hosts map[string]string // alias → address, of servers
}

// NewNetwork creates a bridge network on a free /24.
func NewNetwork(ctx context.Context) (*Network, error) {
	var lastErr error
	for range 20 {
		b := make([]byte, 2)
		_, _ = rand.Read(b)
		subnet := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 128 | b[0]&127, b[1], 0}), 24)
		gw := subnet.Addr().Next()
		nw, err := tcnetwork.New(ctx,
			tcnetwork.WithLabels(map[string]string{Label: "true"}),
			tcnetwork.WithIPAM(&network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet, Gateway: gw}}}),
		)
		if err == nil {
			return &Network{Name: nw.Name, Gateway: gw.String(), net: nw, subnet: subnet, next: 9, hosts: map[string]string{}}, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "overlap") {
			break
		}
	}
	return nil, fmt.Errorf("create network: %w", lastErr)
}

// Remove deletes the network; its containers must be gone first.
func (n *Network) Remove(ctx context.Context) error {
	if n == nil || n.net == nil {
		return nil
	}
	if err := n.net.Remove(ctx); err != nil {
		return fmt.Errorf("remove network %s: %w", n.Name, err)
	}
	n.net = nil
	return nil
}

// Hosts returns "alias:address" for every server (NATS, Redis) started on
// the network, the form Docker's ExtraHosts takes.
func (n *Network) Hosts() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, alias := range slices.Sorted(maps.Keys(n.hosts)) {
		out = append(out, alias+":"+n.hosts[alias])
	}
	return out
}

// allocate hands out the next fixed address; server ones are added to Hosts.
func (n *Network) allocate(alias string, server bool) (netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next++
	if n.next > 254 {
		return netip.Addr{}, fmt.Errorf("network %s: out of addresses", n.Name)
	}
	a := n.subnet.Addr().As4()
	a[3] = byte(n.next)
	addr := netip.AddrFrom4(a)
	if server {
		n.hosts[alias] = addr.String()
	}
	return addr, nil
}

// join returns the fixed address of a container attached to n under alias,
// and the request options that attach it.
func (n *Network) join(alias string, server bool) (string, []testcontainers.ContainerCustomizer, error) {
	addr, err := n.allocate(alias, server)
	if err != nil {
		return "", nil, err
	}
	return addr.String(), []testcontainers.ContainerCustomizer{
		tcnetwork.WithNetwork([]string{alias}, n.net),
		testcontainers.WithEndpointSettingsModifier(func(eps map[string]*network.EndpointSettings) {
			if ep, ok := eps[n.Name]; ok && ep != nil {
				ep.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: addr}
			}
		}),
	}, nil
}
