package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// eventPos is where an event stream stands in the two streams it follows:
// the attempts stream and the output stream. It is every event's id,
// written "<attempts>" while no output was written (the ids streams had
// before live output, which keep working) and "<attempts>.<output>" after.
type eventPos struct {
	attempts, output uint64
}

func (p eventPos) String() string {
	a := strconv.FormatUint(p.attempts, 10)
	if p.output == 0 {
		return a
	}
	return a + "." + strconv.FormatUint(p.output, 10)
}

// errEventID is a Last-Event-ID this server never sent.
var errEventID = errors.New("not an event id")

// parseEventPos reads an id written by eventPos.String.
func parseEventPos(v string) (eventPos, error) {
	a, o, dotted := strings.Cut(v, ".")
	var p eventPos
	var err error
	if p.attempts, err = strconv.ParseUint(a, 10, 64); err != nil {
		return eventPos{}, errEventID
	}
	if dotted {
		if p.output, err = strconv.ParseUint(o, 10, 64); err != nil {
			return eventPos{}, errEventID
		}
	}
	return p, nil
}

// outputKind is the SSE event name of an output chunk: output_superseded
// for the marker that opens a retry, output for the rest. The key is
// looked for as bytes: inside the chunk's text a quote is always escaped,
// so `"supersedes":` can only be the field.
func outputKind(chunk []byte) string {
	if bytes.Contains(chunk, []byte(`"supersedes":`)) {
		return "output_superseded"
	}
	return "output"
}

// supersededOutput returns the test for a retry's opening marker (the
// runtime publishes one for every attempt from the second on, since the
// replica running it cannot know what the earlier one wrote): it voids
// output only when the attempt just before wrote some. Attempts before
// that one were voided by its own marker. The answer depends on the stream
// alone, so a resumed stream makes the same choice as a live one.
func (s *Server) supersededOutput(ctx context.Context, requestID string) func([]byte) bool {
	return func(marker []byte) bool {
		var m struct {
			Supersedes int `json:"supersedes"`
		}
		if json.Unmarshal(marker, &m) != nil || m.Supersedes < 1 {
			return false
		}
		st, err := s.js.Stream(ctx, s.cfg.Topology.Output.Stream)
		if err != nil {
			return true // cannot tell: say so rather than leave stale text shown
		}
		raw, err := st.GetLastMsgForSubject(ctx, s.cfg.Topology.OutputSubject(requestID, m.Supersedes))
		if err != nil {
			return false // the earlier attempt published nothing (or it has aged out)
		}
		return outputKind(raw.Data) == "output"
	}
}
