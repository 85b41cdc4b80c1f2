package transport

import (
	"context"
	"fmt"
	"time"
)

// confirmTimeout bounds one wait for the server's reply to a settle.
const confirmTimeout = 2 * time.Second

// confirmTries is how often a settle is sent when there is no claim to
// bound the repeats by (fencing off).
const confirmTries = 3

// confirm sends a settle (ack, nak, term) as a request and waits for the
// server's reply, repeating it while the claim holds (at most for the
// consumer's AckWait, after which the server redelivers anyway): a settle
// lost in a reconnect or a consumer leader failover then costs the
// failover's seconds, not AckWait. A repeat is harmless: the server
// ignores a settle of a message no longer pending, and a repeated nak of a
// message another replica now holds is what the ledger's lease keeps from
// starting a second run.
func (s *subscription) confirm(m msgRef, c *claim, body []byte) error {
	var err error
	deadline := time.Now().Add(confirmBudget(c))
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), confirmTimeout)
		_, err = s.cfg.JetStream.Conn().RequestWithContext(ctx, m.reply, body)
		cancel()
		now := time.Now()
		if err == nil || !c.held(now) || !now.Before(deadline) {
			break
		}
		s.log.Warn().Err(err).Int("try", try).Str("settle", string(body)).Msg("settle not confirmed; sending it again")
		select {
		case <-time.After(min(time.Duration(try)*100*time.Millisecond, time.Second)):
		case <-s.hardStop:
			return fmt.Errorf("settle %q of %s: stopped: %w", body, m.subject, err)
		}
	}
	if err != nil {
		return fmt.Errorf("settle %q of %s: %w", body, m.subject, err)
	}
	return nil
}

// confirmBudget is how long a settle is repeated: while the claim holds,
// up to its AckWait; a few tries without one.
func confirmBudget(c *claim) time.Duration {
	if c == nil || c.ackWait <= 0 {
		return confirmTries * confirmTimeout
	}
	return c.ackWait
}

// nakBody is a nak, with a redelivery delay when d > 0 (the form nats.go's
// NakWithDelay sends).
func nakBody(d time.Duration) []byte {
	if d <= 0 {
		return bodyNak
	}
	return fmt.Appendf(nil, `-NAK {"delay": %d}`, d.Nanoseconds())
}
