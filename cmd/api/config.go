package api

import (
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/wire"
)

// Scope is what a token allows.
type Scope string

// Scopes.
const (
	// ScopeSubmit allows POST /v1/requests.
	ScopeSubmit Scope = "submit"
	// ScopeRead allows every GET.
	ScopeRead Scope = "read"
	// ScopeCancel allows the cancel routes.
	ScopeCancel Scope = "cancel"
	// ScopeAdmin allows everything.
	ScopeAdmin Scope = "admin"
)

// AllScopes lists every scope.
var AllScopes = []Scope{ScopeSubmit, ScopeRead, ScopeCancel, ScopeAdmin}

// Token is one bearer token the server accepts.
type Token struct {
	// Name is what logs say (the secret never appears in them). Required.
	Name string
	// Secret is the bearer token. Required.
	Secret string
	// Scopes it allows. Required.
	Scopes []Scope
}

func (t Token) allows(s Scope) bool {
	return slices.Contains(t.Scopes, s) || slices.Contains(t.Scopes, ScopeAdmin)
}

// Config configures a Server.
type Config struct {
	// JetStream client; its connection is the Server's NATS. Required.
	JetStream jetstream.JetStream
	// Topology names the streams. Default: wire.Topology{} with
	// defaults.
	Topology wire.Topology
	// Tokens the server accepts. Required: at least one.
	Tokens []Token
	// Logger receives decisions (refused tokens by name, truncated index,
	// NATS down). Default: zerolog.Nop().
	Logger *zerolog.Logger
	// MaxWait bounds ?wait= (larger is clamped). Default: 60s.
	MaxWait time.Duration
	// IndexSize bounds the request index behind GET /v1/requests: past it
	// the oldest requests are dropped and lists say truncated. Default:
	// 100000.
	IndexSize int
	// KeepAlive is the interval of comment lines on event streams.
	// Default: 15s.
	KeepAlive time.Duration
	// RetryAfter is what 503 answers tell callers to wait. Default: 2s.
	RetryAfter time.Duration
	// OpTimeout bounds each NATS call a request makes. Default: 5s.
	OpTimeout time.Duration
	// MaxLookups bounds the status lookups (four NATS reads each) running
	// at once; the rest queue. Default: 128.
	MaxLookups int
}

const (
	defaultMaxWait   = 60 * time.Second
	defaultIndexSize = 100_000
)

func (c *Config) withDefaults() error {
	if c.JetStream == nil {
		return fmt.Errorf("%w: jetstream: required", ErrInvalidConfig)
	}
	if len(c.Tokens) == 0 {
		return fmt.Errorf("%w: tokens: at least one is required", ErrInvalidConfig)
	}
	for i, t := range c.Tokens {
		if err := t.validate(); err != nil {
			return fmt.Errorf("%w: tokens[%d]: %w", ErrInvalidConfig, i, err)
		}
	}
	c.Topology = c.Topology.WithDefaults()
	if c.Logger == nil {
		nop := zerolog.Nop()
		c.Logger = &nop
	}
	c.MaxWait = orDefault(c.MaxWait, defaultMaxWait)
	c.KeepAlive = orDefault(c.KeepAlive, 15*time.Second)
	c.RetryAfter = orDefault(c.RetryAfter, 2*time.Second)
	c.OpTimeout = orDefault(c.OpTimeout, 5*time.Second)
	if c.MaxLookups <= 0 {
		c.MaxLookups = 128
	}
	if c.IndexSize <= 0 {
		c.IndexSize = defaultIndexSize
	}
	return nil
}

func (t Token) validate() error {
	if t.Name == "" {
		return fmt.Errorf("name: required")
	}
	if t.Secret == "" {
		return fmt.Errorf("token %s: secret: required", t.Name)
	}
	if len(t.Scopes) == 0 {
		return fmt.Errorf("token %s: scopes: at least one", t.Name)
	}
	for _, s := range t.Scopes {
		if !slices.Contains(AllScopes, s) {
			return fmt.Errorf("token %s: scopes: %q is not one of submit, read, cancel, admin", t.Name, s)
		}
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
