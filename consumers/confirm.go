package consumers

import (
	"context"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
)

// confirmTimeout bounds one wait for the server's reply to a settle.
const confirmTimeout = 2 * time.Second

// confirmTries is how often a settle is sent before giving up on it.
const confirmTries = 3

// confirm sends a settle (ack, nak, term) as a request and waits for the
// server's reply, repeating it while the claim holds: a settle lost in a
// reconnect or a leader failover then costs seconds, not AckWait. A
// repeat is harmless: the server ignores a settle of a message no longer
// pending, and a repeated nak of a message another replica now holds is
// what the ledger's lease keeps from starting a second run.
func (s *subscription) confirm(m jetstream.Msg, c *claim, body []byte) error {
	var err error
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), confirmTimeout)
		_, err = s.cfg.JetStream.Conn().RequestWithContext(ctx, m.Reply(), body)
		cancel()
		if err == nil || try == confirmTries || !c.held(time.Now()) {
			break
		}
		s.log.Warn().Err(err).Int("try", try).Str("settle", string(body)).Msg("settle not confirmed; sending it again")
	}
	if err != nil {
		return fmt.Errorf("settle %q of %s: %w", body, m.Subject(), err)
	}
	return nil
}

// nakBody is a nak, with a redelivery delay when d > 0 (the form nats.go's
// NakWithDelay sends).
func nakBody(d time.Duration) []byte {
	if d <= 0 {
		return []byte("-NAK")
	}
	return fmt.Appendf(nil, `-NAK {"delay": %d}`, d.Nanoseconds())
}

// settleOp names the settle the pipeline asked for, for logs and counts.
func settleOp(wm *message.Message) string {
	if wm.Metadata.Get(MetaTermReason) != "" {
		return "term"
	}
	return "ack"
}
