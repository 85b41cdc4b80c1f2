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

// ReleaseFenced gives msg back without settling it (see MetaFenced).
func ReleaseFenced(msg *message.Message) bool {
	msg.Metadata.Set(MetaFenced, "1")
	return msg.Nack()
}

// NackWithDelay marks msg for redelivery after d and nacks it. The subscriber
// turns watermill's delay metadata into NakWithDelay.
func NackWithDelay(msg *message.Message, d time.Duration) bool {
	if d > 0 {
		delay.Message(msg, delay.For(d))
	}
	return msg.Nack()
}

// AckWithTerm acks msg, asking the subscriber to Term it with reason.
func AckWithTerm(msg *message.Message, reason string) bool {
	msg.Metadata.Set(MetaTermReason, reason)
	return msg.Ack()
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
