package containers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// CLIOptions configures RunCLI.
type CLIOptions struct {
	// Image to run. Default: ResolveImages's personaq image.
	Image string
	// Network to join. Required: the command reaches NATS by its alias.
	Network *Network
	// Env is the command's environment (NATS_URL, REDIS_URL, …).
	Env map[string]string
	// Timeout bounds the run. Default: 60s.
	Timeout time.Duration
}

// CLIResult is what one personaq command printed and how it exited.
type CLIResult struct {
	ExitCode int
	// Output is stdout and stderr, interleaved as Docker logged them.
	Output string
}

// RunCLI runs `personaq ARGS…` once in a container on opts.Network (the
// images have no shell, so `docker exec` cannot run it in a replica), waits
// for it to exit and removes it.
func RunCLI(ctx context.Context, opts CLIOptions, args ...string) (CLIResult, error) {
	if opts.Network == nil {
		return CLIResult{}, errors.New("run personaq: network: required")
	}
	if opts.Timeout == 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.Image == "" {
		im, err := ResolveImages(ctx)
		if err != nil {
			return CLIResult{}, err
		}
		opts.Image = im.Personaq
	}
	env := map[string]string{}
	maps.Copy(env, opts.Env)
	req := testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:      opts.Image,
			Cmd:        args,
			Env:        env,
			Labels:     map[string]string{Label: "true"},
			WaitingFor: wait.ForExit().WithExitTimeout(opts.Timeout).WithPollInterval(100 * time.Millisecond),
			HostConfigModifier: func(hc *container.HostConfig) {
				hc.ExtraHosts = append(hc.ExtraHosts, opts.Network.Hosts()...)
			},
		},
		Started: true,
	}
	_, join, err := opts.Network.join("personaq-cli-"+randomHex(4), false)
	if err != nil {
		return CLIResult{}, err
	}
	for _, c := range join {
		if err := c.Customize(&req); err != nil {
			return CLIResult{}, err
		}
	}
	ctr, err := testcontainers.GenericContainer(ctx, req)
	n := &Node{alias: "personaq " + fmt.Sprint(args), ctr: ctr}
	if ctr != nil {
		defer func() { _ = n.Terminate(context.WithoutCancel(ctx)) }()
	}
	if err != nil {
		return CLIResult{}, fmt.Errorf("run personaq %v: %w", args, err)
	}
	out, err := n.Logs(ctx)
	if err != nil {
		return CLIResult{}, err
	}
	code, err := n.ExitCode(ctx)
	return CLIResult{ExitCode: code, Output: out}, err
}
