package transport

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// ErrAlreadySettled is returned by a settle of a delivery settled before
// (by its consumer, or released at Close): the first settle stands.
var ErrAlreadySettled = errors.New("personaq: delivery already settled")

// settler is what settling a delivery needs: its subscription, its
// in-flight entry and watermill message, and whether it was settled (by
// the consumer or by a shutdown's release). A Delivery made outside a
// Subscriber has none and settles nothing.
type settler struct {
	sub     *subscription
	id      uint64
	wm      *message.Message
	settled atomic.Bool
	// slot is where the delivery's worker slot is: slotHeld until
	// WorkDone gives it back early or the settle frees it.
	slot atomic.Int32
}

// Where a delivery's worker slot is (settler.slot).
const (
	slotHeld     int32 = iota // taken from the subscription's slots
	slotFinished              // given back by WorkDone; counted in finishing
	slotSettled               // settled: given back, or finishing uncounted
)

// op is how a delivery is settled.
type op uint8

const (
	opAck op = iota
	opTerm
	opRetry
	opRelease
	opAbandon
	opShutdown
)

func (o op) String() string {
	switch o {
	case opAck:
		return "ack"
	case opTerm:
		return "term"
	case opRetry, opRelease:
		return "nak"
	case opAbandon:
		return "none"
	}
	return "release"
}

// Ack settles the delivery as done: DoubleAck, confirmed by the server.
func (d *Delivery) Ack() error { return d.settle(opAck, "", 0) }

// Term settles the delivery as ended for good, never redelivered:
// TermWithReason. Its record must be stored first (Term counts as an ack).
func (d *Delivery) Term(reason string) error { return d.settle(opTerm, reason, 0) }

// RetryAfter gives the message back for its next attempt after delay:
// held by this replica (heartbeated, then a plain Nak when due) when
// delay ≤ Config.HoldUnder, else NakWithDelay(delay).
func (d *Delivery) RetryAfter(delay time.Duration) error { return d.settle(opRetry, "", delay) }

// Release gives the message back after delay without an attempt having
// been made (shutdown, flow control, a fault): the same broker effect as
// RetryAfter, kept apart so logs and counts tell them apart.
func (d *Delivery) Release(delay time.Duration) error { return d.settle(opRelease, "", delay) }

// Abandon settles nothing: the message is left to the server (and to the
// replica that holds it now), for work that lost its lease. Its slot is
// freed and its context ended.
func (d *Delivery) Abandon() { _ = d.settle(opAbandon, "", 0) }

// settle sends the settle now, in the caller's goroutine, once, and
// marks the watermill message acked (ack, term) or nacked (the others) so
// a router's own ack after its handler is a no-op. A settle refused
// because the claim lapsed returns ErrLeaseLost.
func (d *Delivery) settle(o op, reason string, delay time.Duration) error {
	in := d.settler
	if in == nil {
		return nil
	}
	if !in.sub.cfg.TypedSettleOnly && plainSettled(in.wm) {
		// A plain Ack or Nack came first: its watcher settles the message
		// (or already did), and the first settle stands.
		return ErrAlreadySettled
	}
	if !in.settled.CompareAndSwap(false, true) {
		return ErrAlreadySettled
	}
	if o == opAck || o == opTerm {
		in.wm.Ack()
	} else {
		in.wm.Nack()
	}
	return in.sub.apply(in, d.ref, d.claim, o, reason, delay)
}

// WorkDone tells the subscription the delivery's work is over and only
// its settle is left (its terminal record being stored, say): its worker
// slot goes back at once, so the next message is pulled while this one
// finishes, and the delivery stays held and heartbeated until settled.
// At most Config.Finishing deliveries go without a slot; past that the
// delivery keeps its slot until settled (back-pressure on a settle path
// slower than the work) and WorkDone returns false. Once per delivery;
// a no-op outside a Subscriber or after the settle.
func (d *Delivery) WorkDone() bool {
	in := d.settler
	if in == nil {
		return false
	}
	s := in.sub
	if s.finishing.Add(1) > int64(max(s.cfg.Finishing, 0)) {
		s.finishing.Add(-1)
		return false
	}
	if !in.slot.CompareAndSwap(slotHeld, slotFinished) {
		s.finishing.Add(-1)
		return false
	}
	s.release(1)
	return true
}

// plainSettled reports whether the watermill message was acked or nacked.
func plainSettled(wm *message.Message) bool {
	select {
	case <-wm.Acked():
		return true
	case <-wm.Nacked():
		return true
	default:
		return false
	}
}

// watchPlain settles a delivery its consumer settles the plain watermill
// way: msg.Ack() acks it (confirmed, like Delivery.Ack), msg.Nack() has
// it redelivered at once (like Delivery.RetryAfter(0)). A typed settle
// marks the watermill message too, which ends the watch without a second
// settle: whichever settle claims the delivery first is the one sent. The
// watch ends at the hard stop of Close, which releases what is left.
func (s *subscription) watchPlain(d *Delivery) {
	in := d.settler
	o := opAck
	select {
	case <-in.wm.Acked():
	case <-in.wm.Nacked():
		o = opRetry
	case <-s.hardStop:
		return
	}
	if !in.settled.CompareAndSwap(false, true) {
		return // settled typed, or released at Close
	}
	_ = s.apply(in, d.ref, d.claim, o, "", 0)
}

// Settle is watermill middleware for a router on a Subscriber: a handler
// that did not settle its delivery itself is settled by what it returned
// (nil: Ack; an error: redelivered at once), as watermill's own ack and
// nack would.
func Settle(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		out, err := h(msg)
		if d, ok := DeliveryFrom(msg.Context()); ok && d.settler != nil && !d.settler.settled.Load() {
			if err == nil {
				_ = d.Ack()
			} else {
				_ = d.RetryAfter(0)
			}
		}
		return out, err
	}
}

// apply settles m as asked, unless the claim on m lapsed meanwhile (then
// m is left to the server and whoever holds it now); either way its
// context is cancelled after and its slot freed. Once per message.
func (s *subscription) apply(in *settler, m msgRef, c *claim, o op, reason string, delay time.Duration) error {
	uuid := in.wm.UUID
	defer s.settleWG.Done()
	defer s.freeSlot(in)
	defer s.inflight.remove(in.id)
	defer c.cancel(errSettled)
	if o == opAbandon {
		return nil // the pipeline refused the settle and reported it already
	}
	if s.fenced(uuid, c, o.String()) {
		return ErrLeaseLost
	}
	switch o {
	case opAck:
		return s.ack(uuid, m, c)
	case opTerm:
		err := s.confirm(m, c, []byte("+TERM "+reason))
		if err != nil {
			s.log.Error().Err(err).Str("message", uuid).Msg("term not confirmed; the message may be redelivered")
		}
		return err
	case opRetry, opRelease:
		return s.nak(uuid, m, c, delay)
	}
	c.settle()
	_ = s.send(m, bodyNak)
	s.log.Warn().Str("message", uuid).Msg("released unfinished message at shutdown")
	return nil
}

// freeSlot gives a settled delivery's slot back, or, when WorkDone gave
// it back already, takes the delivery off the finishing count.
func (s *subscription) freeSlot(in *settler) {
	switch in.slot.Swap(slotSettled) {
	case slotHeld:
		s.release(1)
	case slotFinished:
		s.finishing.Add(-1)
	}
}

// fenced reports whether a settle must not go out: the claim lapsed. A
// settle refused here is logged and reported through StaleSettle.
func (s *subscription) fenced(uuid string, c *claim, op string) bool {
	if c.held(time.Now()) {
		return false
	}
	c.lose(ErrLeaseLost)
	s.log.Warn().Str("uuid", uuid).Str("op", op).Msg("stale settle refused: the claim on this message lapsed")
	if s.cfg.StaleSettle != nil {
		s.cfg.StaleSettle(s.topic, op)
	}
	return true
}

func (s *subscription) ack(uuid string, m msgRef, c *claim) error {
	if s.cfg.PlainAck {
		err := s.send(m, bodyAck)
		if err != nil {
			s.log.Error().Err(err).Str("message", uuid).Msg("ack not sent; the message will be redelivered and settled from its terminal record")
		}
		return err
	}
	err := s.confirm(m, c, bodyAck)
	if err != nil {
		s.log.Error().Err(err).Str("message", uuid).Msg("ack not confirmed; the message may be redelivered")
	}
	return err
}

func (s *subscription) nak(uuid string, m msgRef, c *claim, d time.Duration) error {
	d = max(d, 0)
	if d > 0 && d <= s.cfg.HoldUnder {
		s.holds.hold(s, m, c, d)
		return nil
	}
	c.settle()
	err := s.confirm(m, c, nakBody(d))
	if err != nil {
		s.log.Error().Err(err).Str("message", uuid).Msg("nak not confirmed; redelivery after AckWait")
	}
	return err
}

// releaseUnsettled releases (Nak) every message its consumer has not
// settled by the hard stop: a handler that ignores its cancelled context
// must not hold up the drain.
func (s *subscription) releaseUnsettled() {
	for _, e := range s.inflight.snapshot() {
		if e.d == nil || !e.d.settler.settled.CompareAndSwap(false, true) {
			continue
		}
		_ = s.apply(e.d.settler, e.ref, e.claim, opShutdown, "", 0)
	}
}
