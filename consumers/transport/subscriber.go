package transport

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/schemas"
)

// Config configures a Subscriber.
type Config struct {
	// JetStream is the client. Required.
	JetStream jetstream.JetStream
	// Stream holds the consumers subscribed to. Required.
	Stream string
	// Slots is how many messages one subscription runs at once; the
	// subscriber never fetches more than its free slots. Default: 16.
	Slots int
	// Finishing is how many deliveries past their work (Delivery.WorkDone)
	// one subscription keeps without a worker slot while their settles are
	// prepared, so at most Slots + Finishing are held at once. Default:
	// Slots; negative: none (a slot is held until the settle).
	Finishing int
	// FetchMaxWait bounds one pull request. Default: 1s.
	FetchMaxWait time.Duration
	// Heartbeat is the InProgress interval for messages being worked on.
	// Default: a third of the consumer's AckWait.
	Heartbeat time.Duration
	// DrainTimeout is how long Close lets in-flight messages finish before
	// cancelling them with ErrShuttingDown and releasing them. Default: 30s.
	DrainTimeout time.Duration
	// HoldUnder: a retry delay up to this long is served by keeping the
	// message (heartbeating it) and sending a plain Nak when it is due,
	// instead of NakWithDelay: nats-server re-arms its redelivery timer on
	// every nak, so under a steady stream of naks a NakWithDelay comes back
	// tens of ms to seconds late (BENCHMARKS.md). Longer delays use
	// NakWithDelay. Default: 5s; negative: always NakWithDelay.
	HoldUnder time.Duration
	// PlainAck sends an ack without waiting for the server's reply. For a
	// limits-retention stream whose acks follow a stored, confirmed
	// terminal record: such an ack writes nothing on the server, and one
	// lost costs a redelivery that settles from the record, not a second
	// run. Terms and naks are still confirmed. Default: acks confirmed.
	PlainAck bool
	// TypedSettleOnly: deliveries are settled only through the typed
	// methods of their Delivery (or the Settle middleware); a plain
	// watermill msg.Ack() or msg.Nack() settles nothing on the server. For a
	// consumer that settles every delivery itself, typed (the personaq
	// runtime, the advisory listener, the saga runner): it saves the
	// goroutine per message that waits for a plain Ack or Nack.
	// Default: false, what a plain watermill consumer needs: msg.Ack() acks
	// the message on the server, msg.Nack() has it redelivered at once.
	TypedSettleOnly bool
	// KeepMsg sets Delivery.Msg, the jetstream.Msg as fetched, for a
	// consumer that settles or reads messages through nats.go itself.
	// Default: not kept (Delivery.Header and Data give its headers and
	// payload): its parsed header map, often larger than the payload, would
	// be held for as long as each message's work runs.
	KeepMsg bool
	// Logger receives decisions (released, settle failures). Default: Nop.
	Logger *zerolog.Logger
	// StaleSettle, when set, is called for every settle refused because the
	// message's claim lapsed (op: ack, nak, term, release).
	StaleSettle func(topic, op string)
	// Gate, when set, admits pulls (flow control): the subscription asks it
	// before every fetch and pulls only what it admits, so a message is
	// never pulled that could not start now. Default: none (free slots
	// decide alone).
	Gate Gate

	// Consumer names the durable consumer a topic binds to. Default:
	// schemas.Durable (a persona's shared durable).
	Consumer func(topic string) string
	// Frozen, while set, suppresses heartbeats and fetches: what a process
	// stopped by SIGSTOP or a long pause looks like to the server and the
	// other replicas, while its work runs on (fault tests). Default: none.
	Frozen *atomic.Bool
}

// Gate admits a subscription's pulls: a rate limiter, an open circuit.
type Gate interface {
	// Admit returns how many of the n pulls wanted may go ahead now (0 to
	// n); with none, how long to wait before asking again.
	Admit(ctx context.Context, n int) (admitted int, wait time.Duration)
	// Unused gives back n admitted pulls that brought no message.
	Unused(ctx context.Context, n int)
}

// Defaults of Config, defined here once: the runtime and the YAML config
// refer to them.
const (
	DefaultSlots        = 16
	DefaultFetchMaxWait = time.Second
	DefaultDrainTimeout = 30 * time.Second
	DefaultHoldUnder    = 5 * time.Second
)

func (c Config) withDefaults() Config {
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if c.Finishing == 0 {
		c.Finishing = c.Slots
	}
	if c.FetchMaxWait == 0 {
		c.FetchMaxWait = DefaultFetchMaxWait
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.HoldUnder == 0 {
		c.HoldUnder = DefaultHoldUnder
	}
	if c.Consumer == nil {
		c.Consumer = schemas.Durable
	}
	if c.Logger == nil {
		nop := zerolog.Nop()
		c.Logger = &nop
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.JetStream == nil:
		return fmt.Errorf("%w: subscriber.jetstream: required", ErrInvalidConfig)
	case c.Stream == "":
		return fmt.Errorf("%w: subscriber.stream: required", ErrInvalidConfig)
	case c.Slots < 0 || c.FetchMaxWait < 0 || c.DrainTimeout < 0 || c.Heartbeat < 0:
		return fmt.Errorf("%w: subscriber: slots and durations must not be negative", ErrInvalidConfig)
	}
	return nil
}

// Subscriber is a watermill message.Subscriber on a JetStream durable pull
// consumer. The topic is a persona; it binds to the durable
// Config.Consumer(topic) (by default the persona's durable), which must exist.
//
// A delivery is settled through the typed methods of the Delivery its
// message carries (Ack, Term, RetryAfter, Release, Abandon), by the Settle
// middleware from what a router handler returned, or (unless
// Config.TypedSettleOnly) by a plain watermill msg.Ack() or msg.Nack().
type Subscriber struct {
	cfg Config

	mu     sync.Mutex
	subs   []*subscription
	closed bool
	// bound holds the consumers Bind looked up, by topic.
	bound map[string]jetstream.Consumer
}

// NewSubscriber validates cfg and returns a Subscriber.
func NewSubscriber(cfg Config) (*Subscriber, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Subscriber{cfg: cfg.withDefaults()}, nil
}

// Bind looks up topic's consumer now, so that a missing one fails here,
// before a router runs, and Subscribe does no I/O for it.
func (s *Subscriber) Bind(ctx context.Context, topic string) error {
	cons, err := s.consumer(ctx, topic)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bound == nil {
		s.bound = map[string]jetstream.Consumer{}
	}
	s.bound[topic] = cons
	return nil
}

func (s *Subscriber) consumer(ctx context.Context, topic string) (jetstream.Consumer, error) {
	cons, err := s.cfg.JetStream.Consumer(ctx, s.cfg.Stream, s.cfg.Consumer(topic))
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: consumer %s on stream %s: %w", topic, s.cfg.Consumer(topic), s.cfg.Stream, err)
	}
	return cons, nil
}

// Subscribe starts fetching for the persona named by topic. The channel is
// closed when ctx is done or the subscriber is closed. Subscribing once
// either has happened gives a closed channel, not an error: a router
// started just as its replica stops then stops too, where an error would
// leave its other handlers unstarted and the router waiting for them.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || ctx.Err() != nil {
		return closedMessages(), nil
	}
	cons, ok := s.bound[topic]
	if !ok {
		var err error
		if cons, err = s.consumer(ctx, topic); err != nil {
			if ctx.Err() != nil {
				return closedMessages(), nil
			}
			return nil, err
		}
	}
	sub := newSubscription(s.cfg, topic, cons)
	s.subs = append(s.subs, sub)
	sub.start(ctx)
	return sub.out, nil
}

// closedMessages is a message channel that is already closed.
func closedMessages() <-chan *message.Message {
	c := make(chan *message.Message)
	close(c)
	return c
}

// Close stops fetching, lets in-flight messages finish within DrainTimeout,
// then cancels the rest with ErrShuttingDown and releases them (Nak without
// delay) so another replica takes them. It is idempotent.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	subs := s.subs
	s.mu.Unlock()

	var wg sync.WaitGroup
	for _, sub := range subs {
		wg.Go(sub.close)
	}
	wg.Wait()
	return nil
}

// InFlight returns how many messages the subscriber holds right now.
func (s *Subscriber) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sub := range s.subs {
		n += sub.inflight.len()
	}
	return n
}
