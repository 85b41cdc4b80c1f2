package retry

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// maxDelay caps every computed delay so a large retry number or coefficient
// can never overflow time.Duration.
const maxDelay = 24 * time.Hour

// Schedule gives the delay before retry n (n = 1 is the delay after the
// first failed attempt).
type Schedule interface {
	Delay(n int) time.Duration
	// String describes the schedule for `policy explain`.
	String() string
}

// Linear waits Step×n: 30s, 60s, 90s … for Step = 30s (the step budget's).
type Linear struct{ Step time.Duration }

// Delay implements Schedule.
func (l Linear) Delay(n int) time.Duration { return capMul(l.Step, float64(max(n, 1))) }

func (l Linear) String() string { return fmt.Sprintf("linear step=%s", l.Step) }

// Fixed waits the same delay before every retry.
type Fixed struct{ Every time.Duration }

// Delay implements Schedule.
func (f Fixed) Delay(int) time.Duration { return clampDelay(f.Every) }

func (f Fixed) String() string { return fmt.Sprintf("fixed every=%s", f.Every) }

// List waits Delays[n-1]; past its end it repeats the last entry.
type List struct{ Delays []time.Duration }

// Delay implements Schedule.
func (l List) Delay(n int) time.Duration {
	if len(l.Delays) == 0 {
		return 0
	}
	i := min(max(n, 1), len(l.Delays)) - 1
	return clampDelay(l.Delays[i])
}

func (l List) String() string {
	parts := make([]string, len(l.Delays))
	for i, d := range l.Delays {
		parts[i] = d.String()
	}
	return "list " + strings.Join(parts, ",")
}

// Exponential waits Initial×Coefficient^(n-1), capped at Maximum, with
// ±Jitter (a fraction, 0..1) drawn from Rand. Field names follow Temporal's
// RetryPolicy.
type Exponential struct {
	Initial     time.Duration
	Coefficient float64
	// Maximum caps the delay; zero means 100×Initial (Temporal's default).
	Maximum time.Duration
	Jitter  float64
	// Rand returns a value in [0,1); nil uses math/rand/v2. Values outside
	// are clamped into it.
	Rand func() float64
}

// Delay implements Schedule. Maximum is a hard cap: jitter is applied
// before it, so a jittered delay never exceeds Maximum either.
func (e Exponential) Delay(n int) time.Duration {
	return min(e.jitter(e.base(n)), e.maximum())
}

// DelayRange implements RangedSchedule: the smallest and largest values
// Delay(n) can return for any Rand.
func (e Exponential) DelayRange(n int) (lo, hi time.Duration) {
	j, b := e.jitterFraction(), e.base(n)
	return min(capMul(b, 1-j), e.maximum()), min(capMul(b, 1+j), e.maximum())
}

// base is the delay before jitter, capped at Maximum.
func (e Exponential) base(n int) time.Duration {
	d := capMul(e.Initial, math.Pow(e.coefficient(), float64(max(n, 1)-1)))
	return min(d, e.maximum())
}

// coefficient treats values below 1 (including unset) as 2, Temporal's
// default; Validate rejects set values below 1.
func (e Exponential) coefficient() float64 {
	if e.Coefficient < 1 {
		return 2
	}
	return e.Coefficient
}

func (e Exponential) maximum() time.Duration {
	if e.Maximum > 0 {
		return e.Maximum
	}
	return capMul(e.Initial, 100)
}

func (e Exponential) jitter(d time.Duration) time.Duration {
	j := e.jitterFraction()
	if j == 0 {
		return d
	}
	r := e.Rand
	if r == nil {
		r = rand.Float64
	}
	return capMul(d, 1+(unit(r())*2-1)*j)
}

// unit limits a draw to [0,1] (NaN reads as 0), so a misbehaving Rand can
// never push a delay outside DelayRange.
func unit(r float64) float64 {
	if !(r > 0) {
		return 0
	}
	return min(r, 1)
}

// jitterFraction is Jitter limited to [0,1]; NaN counts as no jitter.
func (e Exponential) jitterFraction() float64 {
	if !(e.Jitter > 0) {
		return 0
	}
	return min(e.Jitter, 1)
}

func (e Exponential) String() string {
	return fmt.Sprintf("exponential initial=%s coefficient=%g maximum=%s jitter=%g",
		e.Initial, e.coefficient(), e.maximum(), e.Jitter)
}

// capMul multiplies d by f without overflowing, clamped to [0, maxDelay].
// A non-positive d or f yields 0 before multiplying, so 0×Inf (a zero
// Initial at a huge retry number) is 0, not NaN read as the cap.
func capMul(d time.Duration, f float64) time.Duration {
	if d <= 0 || !(f > 0) {
		return 0
	}
	v := float64(d) * f
	if v > float64(maxDelay) {
		return maxDelay
	}
	return time.Duration(v)
}

func clampDelay(d time.Duration) time.Duration {
	return min(max(d, 0), maxDelay)
}
