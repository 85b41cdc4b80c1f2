package advisory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/loop"
	"github.com/personaq/personaq/consumers/streams"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/schemas"
)

// Config configures a Listener.
type Config struct {
	// JetStream client. Required.
	JetStream jetstream.JetStream
	// Writer stores the records. Required.
	Writer *dlq.Writer
	// RequestsStream is the work-queue stream whose crash-looping messages
	// are captured. Default: schemas.DefaultRequestsStream.
	RequestsStream string
	// AdvisoryStream captures the stream's MAX_DELIVERIES advisories
	// (work-queue retention), so an advisory raised while no listener runs
	// waits for one instead of being lost. Default: schemas.DefaultAdvisoryStream.
	AdvisoryStream string
	// Durable is the consumer every listener shares: each advisory is
	// handled by one replica, and redelivered to another if it dies.
	// Default: schemas.DefaultAdvisoryDurable.
	Durable string
	// AckWait for the advisory consumer. Default: 30s.
	AckWait time.Duration
	// Replicas and Storage of the advisory stream. Default: 1, file.
	Replicas int
	Storage  jetstream.StorageType
	// SweepInterval is how often Start's loop runs Sweep (it always runs
	// one at start). Default: 5m; negative: only the one at start.
	SweepInterval time.Duration
	// SweepGrace is how long Sweep waits before capturing what it found, so
	// a message acked a moment ago is gone by then. Default: 2s.
	SweepGrace time.Duration
	// CaptureRetry is how long an advisory whose capture failed waits
	// before it is tried again, doubled on every further failure up to 5
	// minutes. Default: 5s.
	CaptureRetry time.Duration
	// Annotate, when set, completes a record before it is written (e.g.
	// attempts and error history from the attempt ledger).
	Annotate func(ctx context.Context, rec *schemas.QuarantineRecord)
	// Conclude, when set, stores the request's terminal record once its
	// quarantine record (at quarantineSeq) is stored, and before the message
	// leaves its stream, so a caller awaiting the request learns how it
	// ended. It must be create-once (a record already standing is kept): a
	// capture retried after a failure calls it again. An error fails the
	// capture, which is retried. Default: none (no terminal record).
	Conclude func(ctx context.Context, rec *schemas.QuarantineRecord, quarantineSeq uint64) error
	// Logger for decisions. Default: none.
	Logger *zerolog.Logger
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.RequestsStream, schemas.DefaultRequestsStream)
	def(&c.AdvisoryStream, schemas.DefaultAdvisoryStream)
	def(&c.Durable, schemas.DefaultAdvisoryDurable)
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = 5 * time.Minute
	}
	if c.SweepGrace == 0 {
		c.SweepGrace = 2 * time.Second
	}
	if c.CaptureRetry <= 0 {
		c.CaptureRetry = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.JetStream == nil:
		return fmt.Errorf("%w: jetstream: required", ErrInvalidConfig)
	case c.Writer == nil:
		return fmt.Errorf("%w: writer: required", ErrInvalidConfig)
	case c.AckWait < 0 || c.SweepGrace < 0:
		return fmt.Errorf("%w: ack_wait and sweep_grace must not be negative", ErrInvalidConfig)
	}
	return nil
}

// Advisory is a consumer's MAX_DELIVERIES advisory: the message at
// StreamSeq was delivered Deliveries times and never acknowledged.
type Advisory struct {
	Stream     string    `json:"stream"`
	Consumer   string    `json:"consumer"`
	StreamSeq  uint64    `json:"stream_seq"`
	Deliveries uint64    `json:"deliveries"`
	Time       time.Time `json:"timestamp"`
}

// Captured is what Capture did with one crash-looping message.
type Captured struct {
	Stream string
	Seq    uint64
	// QuarantineSeq is the record's sequence (0 when Gone).
	QuarantineSeq uint64
	// Duplicate: the record had been stored before (another replica, or an
	// earlier try that stopped before removing the message).
	Duplicate bool
	// Gone: the message was no longer in the stream (already captured and
	// removed, or acked): nothing to do.
	Gone bool
}

// Listener moves crash-looping messages — delivered MaxDeliver
// times without ever being acked, because their worker died, was killed or
// hung — from the work-queue stream to the quarantine, payload intact,
// with reason max_deliveries. Run one in every replica: the advisory
// consumer is shared, and Capture is idempotent (one record per message,
// removing a message already removed is a no-op).
//
// When the server raises the advisory: nats-server (2.15) gives up on a
// message when the consumer is next asked for messages after the last
// delivery's AckWait ran out — with a live replica pulling that is at
// once; with every replica dead, when the first one comes back.
type Listener struct {
	cfg Config
	js  jetstream.JetStream
	w   *dlq.Writer
	log zerolog.Logger

	loops loop.Group
}

// NewListener validates cfg and returns a listener.
func NewListener(cfg Config) (*Listener, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	l := &Listener{cfg: cfg, js: cfg.JetStream, w: cfg.Writer, log: zerolog.Nop()}
	if cfg.Logger != nil {
		l.log = *cfg.Logger
	}
	l.log = l.log.With().Str("component", "max-deliveries").Logger()
	return l, nil
}

// Provision creates or updates the advisory stream and its durable
// consumer. It is idempotent; Start calls it.
func (l *Listener) Provision(ctx context.Context) error {
	err := streams.Ensure(ctx, l.js, jetstream.StreamConfig{
		Name:        l.cfg.AdvisoryStream,
		Description: "personaq: MAX_DELIVERIES advisories of " + l.cfg.RequestsStream + ", waiting for the listener",
		Subjects:    []string{MaxDeliveriesSubject(l.cfg.RequestsStream)},
		Retention:   jetstream.WorkQueuePolicy,
		Replicas:    l.cfg.Replicas,
		Storage:     l.cfg.Storage,
	})
	if err != nil {
		return err
	}
	_, err = l.js.CreateOrUpdateConsumer(ctx, l.cfg.AdvisoryStream, jetstream.ConsumerConfig{
		Durable:       l.cfg.Durable,
		Description:   "personaq: captures crash-looping requests into the quarantine",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       l.cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 256,
	})
	if err != nil {
		return fmt.Errorf("provision consumer %s: %w", l.cfg.Durable, err)
	}
	return nil
}

// Start provisions, then handles advisories and runs Sweep (once now, then
// every SweepInterval) in the background until ctx is done or Stop is
// called. Calling Start again is a no-op.
func (l *Listener) Start(ctx context.Context) error {
	if err := l.Provision(ctx); err != nil {
		return err
	}
	if _, err := l.js.Consumer(ctx, l.cfg.AdvisoryStream, l.cfg.Durable); err != nil {
		return fmt.Errorf("advisory consumer %s: %w", l.cfg.Durable, err)
	}
	if l.loops.Start(ctx, l.listen, l.sweepLoop) {
		l.log.Info().Str("stream", l.cfg.RequestsStream).Msg("max-deliveries listener started")
	}
	return nil
}

// Stop ends the background work and waits for it. It is idempotent and
// safe to call before Start.
func (l *Listener) Stop() { l.loops.Stop() }

// errSubscriptionEnded: the advisory subscription closed while the
// listener still ran.
var errSubscriptionEnded = errors.New("advisory subscription ended")

// listen handles advisories until ctx ends, subscribing again a second
// after a subscription that could not start or ended.
func (l *Listener) listen(ctx context.Context) {
	for {
		err := l.consume(ctx)
		if ctx.Err() != nil {
			return
		}
		l.log.Warn().Err(err).Msg("advisory consumer error; subscribing again in 1s")
		if !loop.Sleep(ctx, time.Second) {
			return
		}
	}
}

// consume handles advisories, one at a time, on the shared transport (its
// subscriber heartbeats an advisory being captured and releases the ones
// fetched and not handled when ctx ends) until ctx ends.
func (l *Listener) consume(ctx context.Context) error {
	sub, err := transport.NewSubscriber(transport.Config{
		JetStream: l.js, Stream: l.cfg.AdvisoryStream, Slots: 16, Logger: &l.log, TypedSettleOnly: true,
		Consumer: func(string) string { return l.cfg.Durable },
		// A failed capture waits CaptureRetry (5s and up) on the server,
		// not held here: any replica may take it next.
		HoldUnder: -1,
	})
	if err != nil {
		return err
	}
	defer func() { _ = sub.Close() }()
	advisories, err := sub.Subscribe(ctx, "max-deliveries")
	if err != nil {
		return err
	}
	for m := range advisories {
		l.handle(ctx, m)
	}
	return errSubscriptionEnded
}

// settle is how handle ends an advisory's delivery: acked (nil), dropped
// for good (term) or tried again after retry. It is the one place the
// listener talks to the transport's settle API.
func settle(m *message.Message, term string, retry time.Duration) {
	d, ok := transport.DeliveryFrom(m.Context())
	if !ok {
		return
	}
	switch {
	case term != "":
		_ = d.Term(term)
	case retry > 0:
		_ = d.RetryAfter(retry)
	default:
		_ = d.Ack()
	}
}

// handle captures the message an advisory names; the advisory is acked
// only once the record is stored and the message removed.
func (l *Listener) handle(ctx context.Context, m *message.Message) {
	var adv Advisory
	if err := json.Unmarshal(m.Payload, &adv); err != nil || adv.StreamSeq == 0 {
		l.log.Error().Err(err).Msg("undecodable MAX_DELIVERIES advisory dropped")
		settle(m, "undecodable MAX_DELIVERIES advisory", 0)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := l.Capture(cctx, adv); err != nil {
		var tries uint64 = 1
		if d, ok := transport.DeliveryFrom(m.Context()); ok {
			tries = d.Delivered
		}
		delay := captureRetryDelay(l.cfg.CaptureRetry, tries)
		l.failed(cctx, adv, err, delay)
		settle(m, "", delay)
		return
	}
	// An ack that fails leaves the advisory to be redelivered: capture is
	// idempotent. The transport logs it.
	settle(m, "", 0)
}

// Capture reads the message adv names, stores its quarantine record
// (reason max_deliveries, record id RecordID(stream, seq)) and then removes
// it from its stream. Any number of replicas may capture the same message:
// one record is stored, and a message already gone is not an error.
func (l *Listener) Capture(ctx context.Context, adv Advisory) (Captured, error) {
	return l.capture(ctx, adv, false)
}

func (l *Listener) capture(ctx context.Context, adv Advisory, bySweep bool) (Captured, error) {
	c := Captured{Stream: adv.Stream, Seq: adv.StreamSeq}
	s, err := l.js.Stream(ctx, adv.Stream)
	if err != nil {
		return c, streamErr(adv.Stream, err)
	}
	raw, err := s.GetMsg(ctx, adv.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		c.Gone = true
		l.w.ClearCaptureFailure(ctx, adv.Stream, adv.StreamSeq)
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("read %s seq %d: %w", adv.Stream, adv.StreamSeq, err)
	}
	rec := l.record(adv, raw, bySweep)
	if l.cfg.Annotate != nil {
		l.cfg.Annotate(ctx, rec)
	}
	c.QuarantineSeq, c.Duplicate, err = l.w.Put(ctx, rec)
	if err != nil {
		return c, err
	}
	if l.cfg.Conclude != nil {
		if err := l.cfg.Conclude(ctx, rec, c.QuarantineSeq); err != nil {
			return c, fmt.Errorf("quarantined as seq %d but its terminal record not stored: %w", c.QuarantineSeq, err)
		}
	}
	if err := streams.DeleteMsg(ctx, s, adv.StreamSeq); err != nil {
		return c, fmt.Errorf("quarantined as seq %d but not removed from %s: %w", c.QuarantineSeq, adv.Stream, err)
	}
	l.w.ClearCaptureFailure(ctx, adv.Stream, adv.StreamSeq)
	l.log.Warn().Str("stream", adv.Stream).Uint64("stream_seq", adv.StreamSeq).Str("consumer", adv.Consumer).
		Uint64("deliveries", adv.Deliveries).Uint64("quarantine_seq", c.QuarantineSeq).Bool("duplicate", c.Duplicate).
		Str("request_id", rec.RequestID).Bool("sweep", bySweep).Msg("crash-looping message quarantined (max_deliveries)")
	return c, nil
}

// failed reports a capture that failed: an error log naming the message,
// how often it failed and when it is tried next, and the count in the
// index, which `quarantine stats` shows. retry is 0 for the next sweep.
func (l *Listener) failed(ctx context.Context, adv Advisory, err error, retry time.Duration) {
	n := l.w.NoteCaptureFailure(ctx, adv.Stream, adv.StreamSeq, err)
	ev := l.log.Error().Err(err).Str("stream", adv.Stream).Uint64("stream_seq", adv.StreamSeq).Int("failures", n)
	if retry > 0 {
		ev.Float64("backoffSeconds", retry.Seconds()).Msg("crash-looping message not captured; it stays in its stream and its advisory is retried")
		return
	}
	ev.Msg("crash-looping message not captured by the sweep; it stays in its stream and the next sweep retries it")
}

func (l *Listener) record(adv Advisory, raw *jetstream.RawStreamMsg, bySweep bool) *schemas.QuarantineRecord {
	now := l.cfg.Now().UTC()
	rec := &schemas.QuarantineRecord{
		SchemaVersion: schemas.Version, ID: dlq.RecordID(adv.Stream, adv.StreamSeq), Reason: schemas.ReasonMaxDeliveries,
		OriginalSubject: raw.Subject, Headers: maps.Clone(map[string][]string(raw.Header)), Payload: raw.Data,
		Stream: adv.Stream, Sequence: adv.StreamSeq, Deliveries: adv.Deliveries, QuarantinedAt: now,
	}
	if rec.Payload == nil {
		rec.Payload = []byte{}
	}
	rec.LastFailureAt = adv.Time.UTC()
	if adv.Time.IsZero() {
		rec.LastFailureAt = now
	}
	var req schemas.PersonaRequest // provenance only: the payload may be anything
	if json.Unmarshal(raw.Data, &req) == nil {
		rec.RequestID, rec.TaskID, rec.Step, rec.CorrelationID = req.RequestID, req.TaskID, req.Step, req.CorrelationID
		if schemas.ValidToken(req.Persona) {
			rec.Persona = req.Persona
		}
	}
	if rec.Persona == "" {
		rec.Persona = lastToken(raw.Subject)
	}
	rec.Detail = maxDeliveriesDetail(adv, bySweep)
	return rec
}

// maxDeliveriesDetail says what is known of a message the server gave up
// on: how often it was delivered and that no delivery was settled. It does
// not guess why: a worker that crashed, was killed or hung looks the same
// to the server as one cut off from a dependency it needs to settle.
func maxDeliveriesDetail(adv Advisory, bySweep bool) string {
	found := "the server gave up on it"
	if bySweep {
		found = "found by the max-deliveries sweep (its advisory was missed)"
	}
	return fmt.Sprintf("delivered %d times to consumer %s and never settled (MaxDeliver reached): %s. "+
		"No delivery was acknowledged, retried or released: its worker stopped while holding it (crashed, "+
		"killed or hung) or could not settle it; the replicas' logs around the last delivery say which. "+
		"Moved here from %s seq %d", adv.Deliveries, adv.Consumer, found, adv.Stream, adv.StreamSeq)
}

// LastDeliveryDetail is the detail of a max_deliveries record the runtime
// writes itself, on the last delivery the server makes (delivered ==
// MaxDeliver), instead of running it: the same facts as the advisory
// listener's, caught one delivery earlier.
func LastDeliveryDetail(delivered uint64, consumer, stream string, seq uint64) string {
	return fmt.Sprintf("delivered %d times to consumer %s and never settled (MaxDeliver reached): quarantined on "+
		"its last delivery, without running it. No earlier delivery was acknowledged, retried or released: its "+
		"worker stopped while holding it (crashed, killed or hung) or could not settle it; the replicas' logs "+
		"around those deliveries say which. From %s seq %d", delivered, consumer, stream, seq)
}

// streamErr translates a missing stream into dlq.ErrStreamMissing, naming
// it, as the quarantine's own operations do.
func streamErr(stream string, err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("%w: stream %s does not exist", dlq.ErrStreamMissing, stream)
	}
	return fmt.Errorf("stream %s: %w", stream, err)
}

// lastToken returns the last token of a subject.
func lastToken(subject string) string {
	if i := strings.LastIndexByte(subject, '.'); i >= 0 {
		return subject[i+1:]
	}
	return subject
}

// MaxDeliveriesSubject is the subject of the MAX_DELIVERIES advisories of
// every consumer of stream.
func MaxDeliveriesSubject(stream string) string {
	return schemas.MaxDeliveriesAdvisorySubject(stream)
}
