package containers

import (
	"context"
	"fmt"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
)

// Network is a user-defined bridge network the containers of one test share.
type Network struct {
	// Name of the Docker network (random).
	Name string
	// Gateway is the host's address on the network: a server the test runs
	// on the host and binds to Gateway is reachable from every container on
	// the network, and from nowhere else.
	Gateway string

	net *testcontainers.DockerNetwork
}

// NewNetwork creates a bridge network with a random name.
func NewNetwork(ctx context.Context) (*Network, error) {
	nw, err := tcnetwork.New(ctx, tcnetwork.WithLabels(map[string]string{Label: "true"}))
	if err != nil {
		return nil, fmt.Errorf("create network: %w", err)
	}
	n := &Network{Name: nw.Name, net: nw}
	cli, err := docker(ctx)
	if err != nil {
		_ = n.Remove(ctx)
		return nil, err
	}
	info, err := cli.NetworkInspect(ctx, nw.ID, client.NetworkInspectOptions{})
	if err != nil {
		_ = n.Remove(ctx)
		return nil, fmt.Errorf("inspect network %s: %w", nw.Name, err)
	}
	for _, c := range info.Network.IPAM.Config {
		if c.Gateway.Is4() {
			n.Gateway = c.Gateway.String()
			break
		}
	}
	if n.Gateway == "" {
		_ = n.Remove(ctx)
		return nil, fmt.Errorf("network %s has no IPv4 gateway", nw.Name)
	}
	return n, nil
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

// join returns the request option attaching a container to n under alias.
func (n *Network) join(alias string) testcontainers.CustomizeRequestOption {
	return tcnetwork.WithNetwork([]string{alias}, n.net)
}
