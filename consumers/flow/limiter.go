package flow

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultPrefix starts every key unless LimiterConfig.Prefix says otherwise
// (the attempt ledger's default prefix).
const DefaultPrefix = "personaq"

// LimiterConfig configures a Limiter.
type LimiterConfig struct {
	// Client is a plain, Sentinel or Cluster client. Required.
	Client redis.UniversalClient
	// Prefix starts every key; no '{' or '}'. Default: "personaq".
	Prefix string
	// Limits by limiter name. Required (at least one).
	Limits map[string]Limit
}

// Limiter admits requests against named limits shared by every replica.
// It is safe for concurrent use.
type Limiter struct {
	client redis.UniversalClient
	prefix string
	limits map[string]Limit
}

// Grant is what Acquire admitted.
type Grant struct {
	// N requests may start now (their reservations are made).
	N int
	// Wait, when N is 0, is how long until one request fits.
	Wait time.Duration
	// CoolingDown: N is 0 because a provider asked the limiter to cool
	// down; Wait is what is left of it.
	CoolingDown bool
}

// NewLimiter validates cfg and returns a Limiter.
func NewLimiter(cfg LimiterConfig) (*Limiter, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: limiter: client: required", ErrInvalidConfig)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if !ValidName(cfg.Prefix) {
		return nil, fmt.Errorf("%w: limiter: prefix: %q", ErrInvalidConfig, cfg.Prefix)
	}
	if len(cfg.Limits) == 0 {
		return nil, fmt.Errorf("%w: limiters: at least one is required", ErrInvalidConfig)
	}
	l := &Limiter{client: cfg.Client, prefix: cfg.Prefix, limits: map[string]Limit{}}
	for _, name := range slices.Sorted(maps.Keys(cfg.Limits)) {
		lim := cfg.Limits[name].WithDefaults()
		if !ValidName(name) {
			return nil, fmt.Errorf("%w: limiters.%s: names use letters, digits, '.', ':', '-' and '_'", ErrInvalidConfig, name)
		}
		if err := lim.Validate(); err != nil {
			return nil, fmt.Errorf("limiters.%s: %w", name, err)
		}
		l.limits[name] = lim
	}
	return l, nil
}

// Limit returns the defaulted limit called name.
func (l *Limiter) Limit(name string) (Limit, bool) {
	lim, ok := l.limits[name]
	return lim, ok
}

// Names lists the limiters, sorted.
func (l *Limiter) Names() []string { return slices.Sorted(maps.Keys(l.limits)) }

func (l *Limiter) limit(name string) (Limit, error) {
	lim, ok := l.limits[name]
	if !ok {
		return Limit{}, fmt.Errorf("%w: %q", ErrUnknownLimiter, name)
	}
	return lim, nil
}

// Acquire admits up to n requests (n ≥ 1) in one round trip: each reserves
// one request and EstimatedTokens tokens. With none admitted, Grant.Wait
// says when to ask again.
func (l *Limiter) Acquire(ctx context.Context, name string, n int) (Grant, error) {
	lim, err := l.limit(name)
	if err != nil {
		return Grant{}, err
	}
	keys := []string{requestsKey(l.prefix, name), tokensKey(l.prefix, name), coolKey(l.prefix, name)}
	res, err := acquireScript.Run(ctx, l.client, keys, max(n, 1), micros(lim.requestInterval()), lim.Burst,
		micros(lim.tokenInterval()), lim.EstimatedTokens, lim.TokenBurst).Int64Slice()
	if err != nil {
		return Grant{}, redisErrors.Wrap(l.client, "acquire "+name, err)
	}
	return Grant{N: int(res[0]), Wait: time.Duration(res[1]) * time.Microsecond, CoolingDown: res[2] == 1}, nil
}

// Release gives back n admitted requests that did not start (nothing was
// there to pull): their request and estimated token reservations.
func (l *Limiter) Release(ctx context.Context, name string, n int) error {
	lim, err := l.limit(name)
	if err != nil || n <= 0 {
		return err
	}
	return l.adjust(ctx, name, -float64(n)*lim.requestInterval(), -float64(n*lim.EstimatedTokens)*lim.tokenInterval())
}

// Settle reconciles a request's token reservation with what it used:
// reserved is what Acquire reserved for it (Limit.EstimatedTokens), actual
// what the provider reported. Using less gives tokens back; using more
// takes them from what is left of the minute.
func (l *Limiter) Settle(ctx context.Context, name string, reserved, actual int) error {
	lim, err := l.limit(name)
	if err != nil || lim.TokensPerMinute == 0 || actual == reserved || actual < 0 {
		return err
	}
	return l.adjust(ctx, name, 0, float64(actual-reserved)*lim.tokenInterval())
}

func (l *Limiter) adjust(ctx context.Context, name string, reqMicros, tokMicros float64) error {
	keys := []string{requestsKey(l.prefix, name), tokensKey(l.prefix, name)}
	if err := adjustScript.Run(ctx, l.client, keys, micros(reqMicros), micros(tokMicros)).Err(); err != nil {
		return redisErrors.Wrap(l.client, "adjust "+name, err)
	}
	return nil
}

// CoolDown is what a provider's 429 did to a limiter.
type CoolDown struct {
	// Started: no cool-down was running; this one began it.
	Started bool
	// Remaining of the cool-down now in force (it is only ever extended).
	Remaining time.Duration
}

// CoolDown makes every replica stop starting requests on limiter name for
// d (0: the limit's CoolDown), unless a longer cool-down is running.
func (l *Limiter) CoolDown(ctx context.Context, name string, d time.Duration) (CoolDown, error) {
	lim, err := l.limit(name)
	if err != nil {
		return CoolDown{}, err
	}
	if d <= 0 {
		d = lim.CoolDown
	}
	res, err := coolScript.Run(ctx, l.client, []string{coolKey(l.prefix, name)}, d.Microseconds()).Int64Slice()
	if err != nil {
		return CoolDown{}, redisErrors.Wrap(l.client, "cool down "+name, err)
	}
	return CoolDown{Started: res[0] == 1, Remaining: time.Duration(res[1]) * time.Microsecond}, nil
}

// Cooling returns what is left of limiter name's cool-down (0: none).
func (l *Limiter) Cooling(ctx context.Context, name string) (time.Duration, error) {
	if _, err := l.limit(name); err != nil {
		return 0, err
	}
	us, err := peekScript.Run(ctx, l.client, []string{coolKey(l.prefix, name)}).Int64()
	if err != nil {
		return 0, redisErrors.Wrap(l.client, "cooling "+name, err)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// micros formats µs for a script argument (fractions kept).
func micros(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
