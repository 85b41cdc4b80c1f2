package consumers

import (
	"context"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// Live output: what a handler writes to handlers.OutputWriter while it
// works is coalesced and published as output chunks, in order, without
// waiting for the server (core NATS publish into the output stream, like
// attempt events): a token per write must not become a JetStream message
// per token, and the persona is never held up by the broker.
const (
	// outputFlushBytes publishes at once when this much text waits.
	outputFlushBytes = 4 << 10
	// outputFlushEvery publishes text this long after its first byte
	// arrived, at the latest.
	outputFlushEvery = 25 * time.Millisecond
	// outputChunkMax bounds the text of one chunk message (a large write
	// is split).
	outputChunkMax = 32 << 10
)

// OutputObserver is an Observer that also counts live output dropped over
// its cap (OutputTopology.AttemptMax): called once per attempt that
// crossed it, when the attempt ends, with the bytes dropped.
type OutputObserver interface {
	Observer
	OutputTruncated(persona string, bytes int64)
}

// outputSink is where chunks go: a NATS connection's Publish.
type outputSink interface {
	Publish(subject string, data []byte) error
}

var _ outputSink = (*nats.Conn)(nil)

// storedSink is a sink that can also wait until the stream stored a
// message (a publish with a reply: JetStream answers once it is stored).
type storedSink interface {
	Request(subject string, data []byte, timeout time.Duration) (*nats.Msg, error)
}

var _ storedSink = (*nats.Conn)(nil)

// outputFinalAck bounds the wait for the final chunk to be stored: the
// terminal record follows it, so a caller that sees the record and reads
// the output stream finds the whole output there. Live output is not
// authoritative: past this bound the record is written anyway.
const outputFinalAck = 2 * time.Second

// attemptOutput is the live output writer of one attempt: Write appends
// to a buffer bounded by the cap and returns at once; one goroutine,
// started by the first write, publishes the buffer when it reaches
// outputFlushBytes or outputFlushEvery after its first byte, and a final
// chunk when the attempt closes it. Every attempt gets one, most never
// write: what only publishing needs (the subject, the goroutine's
// channels and timer) is made by the first write.
type attemptOutput struct {
	sink      outputSink
	topo      *Topology
	requestID string
	attempt   int
	max       int64
	now       func() time.Time
	log       outputLog
	// truncated, when set, is told the bytes dropped over the cap once
	// the attempt ends.
	truncated func(bytes int64)

	mu      sync.Mutex
	buf     []byte // written, not yet published
	taken   int64  // bytes accepted (≤ max), the cap's measure
	dropped int64  // bytes over the cap
	marked  bool   // the truncated marker is due or sent
	started bool   // the publishing goroutine runs
	closed  bool

	// Set by the first write, when the publishing goroutine starts.
	*outputRun
}

// outputRun is what an attempt's output needs once it publishes.
type outputRun struct {
	subject string
	kick    chan struct{}
	timer   *time.Timer
	done    chan struct{} // closed by close: publish the rest and stop
	ended   chan struct{} // closed by the goroutine when it stopped

	// Owned by the publishing goroutine.
	offset int64 // UTF-8 bytes published so far
	out    []byte
}

// outputLog is where an attempt's output reports what it could not
// publish: the attempt's own logger.
type outputLog interface {
	Warn() *zerolog.Event
	Debug() *zerolog.Event
}

func newAttemptOutput(sink outputSink, t *Topology, requestID string, attempt int, now func() time.Time, log outputLog) *attemptOutput {
	return &attemptOutput{
		sink: sink, topo: t, requestID: requestID, attempt: attempt,
		max: t.Output.AttemptMax, now: now, log: log,
	}
}

// Write implements io.Writer; it never blocks on the broker and never
// fails (what passes the cap is dropped and counted).
func (o *attemptOutput) Write(p []byte) (int, error) {
	n := len(p)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || n == 0 {
		return n, nil
	}
	if room := o.max - o.taken; int64(len(p)) > room {
		o.dropped += int64(len(p)) - room
		p = p[:room]
	}
	wasEmpty := len(o.buf) == 0
	o.buf = append(o.buf, p...)
	o.taken += int64(len(p))
	if !o.started {
		o.started = true
		o.outputRun = &outputRun{
			subject: o.topo.OutputSubject(o.requestID, o.attempt), timer: time.NewTimer(outputFlushEvery),
			kick: make(chan struct{}, 1), done: make(chan struct{}), ended: make(chan struct{}),
		}
		go o.loop()
		return n, nil
	}
	switch {
	case len(o.buf) >= outputFlushBytes, o.dropped > 0 && !o.marked:
		o.poke()
	case wasEmpty && len(p) > 0:
		o.timer.Reset(outputFlushEvery)
	}
	return n, nil
}

func (o *attemptOutput) poke() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// close publishes what is left and the final chunk, then returns (at once
// when nothing was ever written: such an attempt publishes nothing). The
// runtime calls it when the handler returned, before the terminal record
// is written, so a caller sees the final chunk first.
func (o *attemptOutput) close() {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return
	}
	o.closed = true
	started := o.started
	o.mu.Unlock()
	if !started {
		return
	}
	close(o.done)
	<-o.ended
}

func (o *attemptOutput) loop() {
	defer close(o.ended)
	defer o.timer.Stop()
	for {
		select {
		case <-o.kick:
		case <-o.timer.C:
		case <-o.done:
			o.flush(true)
			return
		}
		o.flush(false)
	}
}

// flush publishes the waiting text, whole characters only until the end,
// in chunks of at most outputChunkMax; the truncated marker once the cap
// was crossed; and, at the end, the final chunk.
func (o *attemptOutput) flush(final bool) {
	o.mu.Lock()
	text := o.buf
	if !final {
		text = text[:completeUTF8(text)]
	}
	o.out = append(o.out[:0], text...)
	o.buf = append(o.buf[:0], o.buf[len(text):]...)
	dropped, mark := o.dropped, o.dropped > 0 && !o.marked
	o.marked = o.marked || mark
	if len(o.buf) > 0 && !final { // an unfinished character waits for its other bytes
		o.timer.Reset(outputFlushEvery)
	}
	o.mu.Unlock()

	for len(o.out) > 0 {
		n := min(len(o.out), outputChunkMax)
		if n < len(o.out) {
			n = completeUTF8(o.out[:n])
		}
		o.publish(o.chunk(string(o.out[:n])))
		o.out = o.out[n:]
	}
	if mark {
		c := o.chunk("")
		c.Truncated = dropped
		o.log.Warn().Str("request_id", o.requestID).Int("attempt", o.attempt).Int64("cap_bytes", o.max).
			Msg("live output over its cap: the rest of this attempt's output is dropped and counted")
		o.publish(c)
	}
	if final {
		c := o.chunk("")
		c.Final, c.Truncated = true, dropped
		o.publishStored(c)
		if dropped > 0 && o.truncated != nil {
			o.truncated(dropped)
		}
	}
}

// chunk is the next chunk carrying data; the offset moves past it.
func (o *attemptOutput) chunk(data string) *schemas.OutputChunk {
	if !utf8.ValidString(data) {
		data = toValidUTF8(data)
	}
	c := &schemas.OutputChunk{SchemaVersion: schemas.Version, RequestID: o.requestID, Attempt: o.attempt,
		Offset: o.offset, Data: data, At: o.now().UTC()}
	o.offset += int64(len(data))
	return c
}

// publishStored publishes c and waits until the output stream stored it
// (every chunk before it, sent on the same connection, is stored first).
func (o *attemptOutput) publishStored(c *schemas.OutputChunk) {
	ss, ok := o.sink.(storedSink)
	if !ok {
		o.publish(c)
		return
	}
	if _, err := ss.Request(o.subject, schemas.MarshalOutputChunk(c), outputFinalAck); err != nil {
		o.log.Debug().Err(err).Str("request_id", o.requestID).Int("attempt", o.attempt).Msg("final output chunk not confirmed stored")
	}
}

func (o *attemptOutput) publish(c *schemas.OutputChunk) {
	if err := o.sink.Publish(o.subject, schemas.MarshalOutputChunk(c)); err != nil {
		o.log.Debug().Err(err).Str("request_id", o.requestID).Int("attempt", o.attempt).Msg("output chunk not published")
	}
}

// completeUTF8 is the length of b without an incomplete character at its
// end (one whose remaining bytes may come with the next write).
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if !utf8.RuneStart(b[i]) {
			continue
		}
		if !utf8.FullRune(b[i:]) {
			return i
		}
		break
	}
	return len(b)
}

// toValidUTF8 replaces each invalid byte with U+FFFD, as json.Marshal
// would, so the offsets count the text callers receive.
func toValidUTF8(s string) string {
	b := make([]byte, 0, len(s)+8)
	for _, r := range s {
		b = utf8.AppendRune(b, r) // an invalid byte ranges as utf8.RuneError
	}
	return string(b)
}

// liveOutput puts the attempt's live output writer in ctx; the returned
// function closes it (publishing the final chunk) and returns once that is
// done. A runtime without a connection (stage tests) gives the handler
// none: handlers.OutputWriter is then io.Discard.
func (r *Runtime) liveOutput(ctx context.Context, st *attemptState) (context.Context, func()) {
	if r.js == nil {
		return ctx, func() {}
	}
	live := &lazyOutput{r: r, st: st}
	return handlers.WithOutput(ctx, live), live.close
}

// lazyOutput is an attempt's live output writer, made on the first Write:
// most handlers write none, and an attempt in flight would otherwise hold
// the writer's state for its whole run (about 200 bytes each, 2 MB with
// 10,000 attempts in flight).
type lazyOutput struct {
	r  *Runtime
	st *attemptState

	mu     sync.Mutex
	w      *attemptOutput
	closed bool
}

func (l *lazyOutput) Write(p []byte) (int, error) {
	l.mu.Lock()
	if l.w == nil && !l.closed {
		l.w = l.r.newOutput(l.st)
	}
	w := l.w
	l.mu.Unlock()
	if w == nil { // written after the attempt ended: dropped, as a closed writer drops it
		return len(p), nil
	}
	return w.Write(p)
}

// close closes the writer, if a Write made one; no Write is taken after.
func (l *lazyOutput) close() {
	l.mu.Lock()
	l.closed = true
	w := l.w
	l.mu.Unlock()
	if w != nil {
		w.close()
	}
}

// newOutput is the live output writer of st's attempt.
func (r *Runtime) newOutput(st *attemptState) *attemptOutput {
	live := newAttemptOutput(r.js.Conn(), &r.topo, st.req.RequestID, st.attempt.Number, r.now, &st.log)
	if o, ok := r.obs.(OutputObserver); ok {
		persona := st.persona.name
		live.truncated = func(bytes int64) { o.OutputTruncated(persona, bytes) }
	}
	return live
}

// publishSupersede opens attempt (2 or later) on the output stream: the
// output of every earlier attempt is void. It is published whether or not
// the earlier attempt wrote any (this replica cannot know).
func (r *Runtime) publishSupersede(st *attemptState) {
	if st.attempt.Number < 2 || r.js == nil {
		return
	}
	c := &schemas.OutputChunk{SchemaVersion: schemas.Version, RequestID: st.req.RequestID, Attempt: st.attempt.Number,
		Supersedes: st.attempt.Number - 1, At: r.now().UTC()}
	if err := r.js.Conn().Publish(r.topo.OutputSubject(st.req.RequestID, st.attempt.Number), schemas.MarshalOutputChunk(c)); err != nil {
		st.log.Debug().Err(err).Int("attempt", st.attempt.Number).Msg("output supersede marker not published")
	}
}

// OutputWriter is handlers.OutputWriter: the attempt's live output writer,
// found in the handler's context.
func OutputWriter(ctx context.Context) io.Writer { return handlers.OutputWriter(ctx) }
