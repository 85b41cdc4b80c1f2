package transport

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/loop"
	"github.com/personaq/personaq/schemas"
)

// maxBatch caps one pull request.
const maxBatch = 256

// subscription is one topic's fetch loop, worker slots, heartbeats and drain.
type subscription struct {
	cfg   Config
	topic string
	cons  jetstream.Consumer
	log   zerolog.Logger

	out    chan *message.Message
	tokens chan struct{} // one token per free worker slot
	// finishing counts deliveries whose slot WorkDone gave back early and
	// that are not settled yet (at most cfg.Finishing).
	finishing atomic.Int64
	inflight  *inflightSet
	holds     holdSet

	// runCtx parents every message context. It outlives the Subscribe
	// context so a router shutdown drains instead of cutting work off; Close
	// cancels it with ErrShuttingDown once DrainTimeout has passed.
	runCtx    context.Context
	cancelRun context.CancelCauseFunc

	// The two loops stop at different points of a drain, so each has its
	// own Group: fetching ends with the Subscribe context or at Close,
	// first; heartbeats outlive both until Close's hard stop, so a message
	// still in flight during the drain keeps its claim.
	fetching loop.Group
	beats    loop.Group

	hardStop  chan struct{} // closed: release whatever is still unsettled
	settleWG  sync.WaitGroup
	closeOnce sync.Once
}

func newSubscription(cfg Config, topic string, cons jetstream.Consumer) *subscription {
	s := &subscription{
		cfg: cfg, topic: topic, cons: cons,
		log:      cfg.Logger.With().Str("persona", topic).Logger(),
		out:      make(chan *message.Message),
		tokens:   make(chan struct{}, cfg.Slots),
		inflight: newInflightSet(),
		hardStop: make(chan struct{}),
	}
	for range cfg.Slots {
		s.tokens <- struct{}{}
	}
	return s
}

// start runs the fetch loop until ctx ends or Close, and the heartbeat
// loop until Close's hard stop (not ctx: a router shutdown drains).
func (s *subscription) start(ctx context.Context) {
	s.runCtx, s.cancelRun = context.WithCancelCause(context.WithoutCancel(ctx))
	s.fetching.Start(ctx, s.fetchLoop)
	s.beats.Start(context.WithoutCancel(ctx), s.heartbeatLoop)
}

// fetchLoop pulls while ctx lives (it ends with the Subscribe context or
// at Close), then closes the channel handed to the router.
func (s *subscription) fetchLoop(ctx context.Context) {
	defer close(s.out)
	for {
		n := s.acquire(ctx)
		if n == 0 {
			return
		}
		if s.cfg.Frozen != nil && s.cfg.Frozen.Load() {
			s.release(n)
			loop.Sleep(ctx, s.cfg.FetchMaxWait)
			continue
		}
		if n = s.admit(ctx, n); n == 0 {
			continue
		}
		got := s.fetch(ctx, n)
		if got < n && s.cfg.Gate != nil {
			s.cfg.Gate.Unused(s.runCtx, n-got)
		}
		s.release(n - got)
	}
}

// admit asks the gate (if any) how many of the n slots taken may pull now
// and gives the others back; with none admitted it waits as told (or
// until stopped) holding no message, and returns 0.
func (s *subscription) admit(ctx context.Context, n int) int {
	if s.cfg.Gate == nil {
		return n
	}
	k, wait := s.cfg.Gate.Admit(s.runCtx, n)
	k = min(max(k, 0), n)
	s.release(n - k)
	if k == 0 {
		loop.Sleep(ctx, max(wait, time.Millisecond))
	}
	return k
}

// acquire blocks for one free slot, then takes every other free one. Stop
// wins over a free slot: a draining replica pulls nothing more.
func (s *subscription) acquire(ctx context.Context) int {
	select {
	case <-ctx.Done():
		return 0
	default:
	}
	select {
	case <-s.tokens:
	case <-ctx.Done():
		return 0
	}
	select {
	case <-ctx.Done():
		s.release(1)
		return 0
	default:
	}
	n := 1
	for n < s.cfg.Slots {
		select {
		case <-s.tokens:
			n++
		default:
			return n
		}
	}
	return n
}

func (s *subscription) release(n int) {
	for range n {
		s.tokens <- struct{}{}
	}
}

// fetch pulls at most n messages and dispatches them; it returns how many
// it received (each holds a slot until settled). ctx is the fetch loop's:
// once it ends, a message still arriving is given back.
func (s *subscription) fetch(ctx context.Context, n int) int {
	// One pull brings at most maxBatch: a huge batch would leave its tail
	// waiting (AckWait running) while the head is dispatched.
	conn := s.connection()
	batch, err := s.cons.Fetch(min(n, maxBatch), jetstream.FetchMaxWait(s.cfg.FetchMaxWait))
	if err != nil {
		s.log.Warn().Err(err).Msg("fetch failed; retrying")
		loop.Sleep(ctx, s.cfg.FetchMaxWait)
		return 0
	}
	got := 0
	for m := range batch.Messages() {
		got++
		// Heartbeats cover the message from receipt, not from dispatch.
		msgCtx, cancel := context.WithCancelCause(s.runCtx)
		c := newClaim(s.ackWait(), time.Now(), cancel)
		if s.connection() != conn {
			conn = 0 // a reconnect since the pull: this batch's connection is not known
		}
		s.dispatch(ctx, msgCtx, m, c, s.inflight.add(refOf(m), c), conn)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn().Err(err).Msg("fetch ended with an error")
		loop.Sleep(ctx, s.cfg.FetchMaxWait)
	}
	return got
}

// connection is the client connection's reconnect count plus one
// (Delivery.Connection).
func (s *subscription) connection() uint64 {
	return s.cfg.JetStream.Conn().Stats().Reconnects + 1
}

// dispatch hands one message, with its context msgCtx, to the router and
// starts its settler. A message fetched once the fetch loop's ctx ended
// (stopping) is released at once.
func (s *subscription) dispatch(ctx, msgCtx context.Context, m jetstream.Msg, c *claim, id, conn uint64) {
	d, err := newDelivery(m, time.Now())
	if err != nil {
		s.log.Error().Err(err).Msg("message without JetStream metadata; releasing")
		_ = m.Nak()
		s.inflight.remove(id)
		c.cancel(errSettled)
		s.release(1)
		return
	}
	d.claim, d.Connection = c, conn
	if s.cfg.KeepMsg {
		d.Msg = m
	}
	wm := toWatermill(m, d)
	wm.SetContext(withDelivery(msgCtx, d))
	// Stop wins: a pull made before the stop may still bring a message, and
	// a select with both cases ready would pick at random.
	select {
	case <-ctx.Done():
		s.giveBack(m, c, id)
		return
	default:
	}
	d.settler = &settler{sub: s, id: id, wm: wm}
	s.inflight.attach(id, d)
	s.settleWG.Add(1)
	select {
	case s.out <- wm:
		if !s.cfg.TypedSettleOnly {
			// Per-message work, not a loop: it waits for this one
			// delivery's plain settle (or the hard stop) and returns;
			// Close waits for it through settleWG.
			go s.watchPlain(d)
		}
	case <-ctx.Done():
		d.settler.settled.Store(true) // never handed out: nobody else settles it
		s.settleWG.Done()
		s.giveBack(m, c, id)
	}
}

// giveBack releases a message fetched while stopping, at once, to another
// replica.
func (s *subscription) giveBack(m jetstream.Msg, c *claim, id uint64) {
	c.settle()
	_ = m.Nak()
	s.inflight.remove(id)
	c.cancel(errSettled)
	s.release(1)
}

// toWatermill wraps m, and keeps in d what Delivery.Header rebuilds the
// headers from. Its UUID is the one the Publisher sent
// (schemas.HeaderMessageUUID), else the Nats-Msg-Id, else stream:sequence:
// the same on every redelivery.
func toWatermill(m jetstream.Msg, d *Delivery) *message.Message {
	h := m.Headers()
	d.msgID, d.msgUUID = h.Get(jetstream.MsgIDHeader), h.Get(schemas.HeaderMessageUUID)
	uuid := d.msgUUID
	if uuid == "" {
		uuid = d.msgID
	}
	if uuid == "" {
		uuid = d.Stream + ":" + strconv.FormatUint(d.Sequence, 10)
	}
	wm := message.NewMessage(uuid, payloadOf(m, h))
	for k, v := range h {
		if len(v) > 1 {
			if d.multi == nil {
				d.multi = nats.Header{}
			}
			d.multi[k] = v
		}
		if len(v) > 0 && !reservedMetadata(k) {
			wm.Metadata.Set(k, v[0])
		}
	}
	return wm
}

// payloadOf is m's payload, as the message keeps it while it is worked on.
// nats.go reads a message with headers into one buffer, the header block
// first, and Data is the buffer's tail: holding Data holds the header
// block too, which the metadata already holds as text. Such a payload is
// copied out (about 250 bytes less held per persona request in flight).
func payloadOf(m jetstream.Msg, h nats.Header) []byte {
	if len(h) == 0 {
		return m.Data()
	}
	return bytes.Clone(m.Data())
}

// reservedMetadata names the headers that do not become metadata: the
// transport's identity headers stay with the stored message: a received message published again (forwarded) gets
// an id of its own instead of the original's Nats-Msg-Id, which would make
// it a duplicate. Every header is still kept in the message, and in a
// quarantine record, as published.
func reservedMetadata(key string) bool {
	switch key {
	case jetstream.MsgIDHeader, schemas.HeaderMessageUUID:
		return true
	}
	return false
}

// close drains: no more fetching, in-flight work gets DrainTimeout, then its
// context is cancelled with ErrShuttingDown and, after a short grace for
// handlers to return, anything unsettled is released.
func (s *subscription) close() {
	s.closeOnce.Do(func() {
		s.fetching.Stop() // no more fetching; returns once out is closed
		if !waitTimeout(&s.settleWG, s.cfg.DrainTimeout) {
			s.cancelRun(ErrShuttingDown)
			waitTimeout(&s.settleWG, min(s.cfg.DrainTimeout, 5*time.Second))
		}
		close(s.hardStop)
		// Heartbeats end here, before anything is released: a beat must
		// not follow the release of the message it beats.
		s.beats.Stop()
		s.releaseUnsettled()
		s.settleWG.Wait()
		if s.cfg.PlainAck {
			// Plain acks are only buffered: send them before Close returns.
			_ = s.cfg.JetStream.Conn().FlushTimeout(confirmTimeout)
		}
		s.holds.releaseAll(s)
		s.cancelRun(ErrShuttingDown)
	})
}

// waitTimeout reports whether wg is done within d. Its goroutine is a
// one-shot wait, not a loop; after a timeout it ends with wg, which close
// waits for anyway.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
