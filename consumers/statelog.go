package consumers

import (
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/schemas"
)

// stateLog is a delivery's logger. Its fields (persona, stream_seq, and
// once decoded task_id, step, request_id, correlation_id) are written
// into each line as it is logged rather than into a logger context made
// per delivery: zerolog's With copies the context into a fresh 500-byte
// buffer, twice per delivery, kept for as long as the attempt runs,
// although most attempts log only once they end. A line reads the same
// either way: level, the runtime logger's own fields, then these.
type stateLog struct {
	// l is the logger the fields are added to (nil: zerolog.Nop).
	l *zerolog.Logger
	// persona, when set, adds its name and the delivery's stream_seq.
	// (Pointers, not copies: the state is kept while the attempt runs.)
	persona *personaRuntime
	seq     uint64
	// req, once decoded, adds its task_id, step and request_id, and
	// corrID the correlation id.
	req    *schemas.PersonaRequest
	corrID string
}

// deliveryLog is the logger of delivery seq of persona p.
func (r *Runtime) deliveryLog(p *personaRuntime, seq uint64) stateLog {
	return stateLog{l: &r.log, persona: p, seq: seq}
}

// fixedLog logs with l as is (its context already carries the fields).
func fixedLog(l zerolog.Logger) stateLog { return stateLog{l: &l} }

// decoded adds the request's fields to every line from now on.
func (s *stateLog) decoded(req *schemas.PersonaRequest, corrID string) {
	s.req, s.corrID = req, corrID
}

var nopLog = zerolog.Nop()

func (s *stateLog) logger() *zerolog.Logger {
	if s == nil || s.l == nil {
		return &nopLog
	}
	return s.l
}

// with adds the delivery's fields to e (nil when its level is off).
func (s *stateLog) with(e *zerolog.Event) *zerolog.Event {
	if e == nil || s == nil {
		return e
	}
	if s.persona != nil {
		e.Str("persona", s.persona.name).Uint64("stream_seq", s.seq)
	}
	if q := s.req; q != nil {
		e.Str("task_id", q.TaskID).Str("step", q.Step).Str("request_id", q.RequestID).Str("correlation_id", s.corrID)
	}
	return e
}

func (s *stateLog) Debug() *zerolog.Event { return s.with(s.logger().Debug()) }
func (s *stateLog) Info() *zerolog.Event  { return s.with(s.logger().Info()) }
func (s *stateLog) Warn() *zerolog.Event  { return s.with(s.logger().Warn()) }
func (s *stateLog) Error() *zerolog.Event { return s.with(s.logger().Error()) }
