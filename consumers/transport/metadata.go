package transport

import (
	"time"

	"github.com/ThreeDotsLabs/watermill/components/delay"
	"github.com/ThreeDotsLabs/watermill/message"
)

// Metadata keys the pipeline sets on a watermill message to tell the
// subscriber how to settle it.
const (
	// MetaTermReason, set before Ack, makes the subscriber Term the message
	// with this reason instead of acking it (the quarantine record is
	// already stored).
	MetaTermReason = "personaq_term_reason"
	// MetaFenced, set before Nack, makes the subscriber settle nothing: the
	// pipeline lost the attempt's lease, so the message belongs to whoever
	// holds it now (the server redelivers it when nobody does).
	MetaFenced = "personaq_fenced"
)

// The settle functions below work on any message a Subscriber delivered.
// With Config.SettleInline the settle is sent (and confirmed) before they
// return, in the caller's goroutine; otherwise the subscription's settler
// sends it once watermill's Ack or Nack is seen.

// Ack acks msg: DoubleAck.
func Ack(msg *message.Message) bool {
	ok := msg.Ack()
	settleInline(msg)
	return ok
}

// ReleaseFenced gives msg back without settling it (see MetaFenced).
func ReleaseFenced(msg *message.Message) bool {
	msg.Metadata.Set(MetaFenced, "1")
	ok := msg.Nack()
	settleInline(msg)
	return ok
}

// NackWithDelay marks msg for redelivery after d and nacks it: held by the
// subscription when d ≤ Config.HoldUnder, else NakWithDelay(d).
func NackWithDelay(msg *message.Message, d time.Duration) bool {
	if d > 0 {
		delay.Message(msg, delay.For(d))
	}
	ok := msg.Nack()
	settleInline(msg)
	return ok
}

// AckWithTerm acks msg, asking the subscriber to Term it with reason.
func AckWithTerm(msg *message.Message, reason string) bool {
	msg.Metadata.Set(MetaTermReason, reason)
	ok := msg.Ack()
	settleInline(msg)
	return ok
}

// settleInline sends the settle of an inline-settled delivery now, once.
func settleInline(msg *message.Message) {
	d, ok := DeliveryFrom(msg.Context())
	if !ok || d.inline == nil || !d.inline.settled.CompareAndSwap(false, true) {
		return
	}
	in := d.inline
	kind := settleNak
	select {
	case <-msg.Acked():
		kind = settleAck
	default:
	}
	in.sub.apply(in.wm, in.m, d.claim, in.id, kind)
}

// NakDelay reads the redelivery delay NackWithDelay set on msg (watermill's
// delay metadata). DelayedForKey keeps the full
// precision; DelayedUntilKey is RFC 3339 (whole seconds) and only a fallback.
func NakDelay(msg *message.Message, now time.Time) time.Duration {
	if s := msg.Metadata.Get(delay.DelayedForKey); s != "" {
		if d, err := time.ParseDuration(s); err == nil {
			return max(d, 0)
		}
	}
	if s := msg.Metadata.Get(delay.DelayedUntilKey); s != "" {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return max(t.Sub(now), 0)
		}
	}
	return 0
}
