package console

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/retry"
)

// Ledger is what the task page reads from the attempt ledger;
// *ledger.Ledger implements it.
type Ledger interface {
	Steps(ctx context.Context, taskID string) ([]ledger.StepKey, error)
	History(ctx context.Context, key ledger.StepKey) ([]retry.Attempt, ledger.State, error)
}

// DefaultListen is where `personaq console` and `personaq dev` serve the
// console unless told otherwise (loopback only).
const DefaultListen = "127.0.0.1:8080"

// Config configures a console Server.
type Config struct {
	// JetStream client of the deployment. Required.
	JetStream jetstream.JetStream
	// Topology names the streams. Default: wire.Topology defaults.
	Topology wire.Topology
	// Ledger is the attempt ledger for task timelines. Default: none (the
	// task page then says how to configure one).
	Ledger Ledger
	// Token is what an operator presents to replay, purge, pause or
	// resume. Required unless ReadOnly; at least 16 characters.
	Token string
	// ReadOnly hides every action and refuses every mutation.
	ReadOnly bool
	// Logger receives decision logs (never tokens or payloads).
	// Default: zerolog.Nop().
	Logger *zerolog.Logger
	// PageSize is how many quarantine records a page lists. Default: 50.
	PageSize int
	// Window is how far back the overview's charts and the live page's
	// backlog reach. Default: 1h.
	Window time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// minTokenLen keeps a guessable token from guarding mutations.
const minTokenLen = 16

func (c Config) withDefaults() Config {
	c.Topology = c.Topology.WithDefaults()
	if c.Logger == nil {
		nop := zerolog.Nop()
		c.Logger = &nop
	}
	if c.PageSize <= 0 {
		c.PageSize = 50
	}
	if c.Window <= 0 {
		c.Window = time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.JetStream == nil:
		return fmt.Errorf("%w: jetstream: required", ErrInvalidConfig)
	case !c.ReadOnly && len(c.Token) < minTokenLen:
		return fmt.Errorf("%w: token: at least %d characters unless read-only", ErrInvalidConfig, minTokenLen)
	}
	return nil
}
