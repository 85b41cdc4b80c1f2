package flow

import (
	"fmt"
	"regexp"
	"time"
)

// Defaults of a Limit.
const (
	// DefaultEstimatedTokens is what a request reserves against a
	// tokens-per-minute limit before its real usage is known.
	DefaultEstimatedTokens = 1000
	// DefaultCoolDown is how long a limiter cools down after a provider's
	// 429 that did not say how long to wait.
	DefaultCoolDown = time.Second
)

// nameRe: limiter and persona names end up inside Redis keys (and their
// Cluster hash tags).
var nameRe = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

// Limit is one named limiter: a provider's limits for a model or an API
// key. At least one of RequestsPerMinute and TokensPerMinute is required.
type Limit struct {
	// RequestsPerMinute admitted across every replica. 0: no request limit.
	RequestsPerMinute int
	// TokensPerMinute admitted across every replica; each request reserves
	// EstimatedTokens before it starts (Settle corrects the estimate).
	// 0: no token limit.
	TokensPerMinute int
	// EstimatedTokens a request reserves. Default: 1000 (with a token limit).
	EstimatedTokens int
	// Burst is how many requests may start at once after a quiet spell.
	// Providers enforce their per-minute limits over shorter periods, so
	// the default is one second's worth: RequestsPerMinute/60, at least 1.
	Burst int
	// TokenBurst is the same for tokens. Default: TokensPerMinute/60, at
	// least EstimatedTokens.
	TokenBurst int
	// CoolDown applies after a 429 or 529 that named no wait. Default: 1s.
	CoolDown time.Duration
}

// WithDefaults fills the zero fields.
func (l Limit) WithDefaults() Limit {
	if l.TokensPerMinute > 0 && l.EstimatedTokens == 0 {
		l.EstimatedTokens = DefaultEstimatedTokens
	}
	if l.RequestsPerMinute > 0 && l.Burst == 0 {
		l.Burst = max(1, l.RequestsPerMinute/60)
	}
	if l.TokensPerMinute > 0 && l.TokenBurst == 0 {
		l.TokenBurst = max(l.EstimatedTokens, l.TokensPerMinute/60)
	}
	if l.CoolDown == 0 {
		l.CoolDown = DefaultCoolDown
	}
	return l
}

// Validate reports the first problem of a defaulted Limit, naming its field.
func (l Limit) Validate() error {
	switch {
	case l.RequestsPerMinute < 0 || l.TokensPerMinute < 0 || l.EstimatedTokens < 0 || l.Burst < 0 || l.TokenBurst < 0:
		return fmt.Errorf("%w: limits must not be negative", ErrInvalidConfig)
	case l.RequestsPerMinute == 0 && l.TokensPerMinute == 0:
		return fmt.Errorf("%w: requests_per_minute or tokens_per_minute: set at least one", ErrInvalidConfig)
	case l.TokensPerMinute > 0 && l.EstimatedTokens > l.TokensPerMinute:
		return fmt.Errorf("%w: estimated_tokens: %d is more than tokens_per_minute (%d)", ErrInvalidConfig, l.EstimatedTokens, l.TokensPerMinute)
	case l.TokensPerMinute > 0 && l.TokenBurst < l.EstimatedTokens:
		return fmt.Errorf("%w: token_burst: %d is less than estimated_tokens (%d): no request would ever start", ErrInvalidConfig, l.TokenBurst, l.EstimatedTokens)
	case l.CoolDown < 0:
		return fmt.Errorf("%w: cool_down: must not be negative", ErrInvalidConfig)
	}
	return nil
}

// ValidName reports whether name can name a limiter or a circuit.
func ValidName(name string) bool { return nameRe.MatchString(name) }

// requestInterval is the time one request uses of the limit, in µs (0: no
// request limit).
func (l Limit) requestInterval() float64 {
	if l.RequestsPerMinute == 0 {
		return 0
	}
	return 60e6 / float64(l.RequestsPerMinute)
}

// tokenInterval is the time one token uses of the limit, in µs.
func (l Limit) tokenInterval() float64 {
	if l.TokensPerMinute == 0 {
		return 0
	}
	return 60e6 / float64(l.TokensPerMinute)
}
