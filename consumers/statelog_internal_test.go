package consumers

import (
	"bytes"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

// A delivery's lines read as they did from a logger context made per
// delivery: the same fields in the same order, before and after decode.
func TestStateLogLinesAsWithContext(t *testing.T) {
	t.Parallel()
	var got, want bytes.Buffer
	r := &Runtime{log: zerolog.New(&got).With().Str("replica", "r1").Logger()}
	base := zerolog.New(&want).With().Str("replica", "r1").Logger()
	p := &personaRuntime{name: "p"}
	req := schemas.NewRequest("task-1", "main", "p")

	s := r.deliveryLog(p, 7)
	old := base.With().Str("persona", "p").Uint64("stream_seq", 7).Logger()
	s.Warn().Int("attempt", 1).Msg("before decode")
	old.Warn().Int("attempt", 1).Msg("before decode")
	s.Debug().Msg("a level that is on")
	old.Debug().Msg("a level that is on")

	s.decoded(req, "corr-1")
	old = old.With().Str("task_id", req.TaskID).Str("step", req.Step).Str("request_id", req.RequestID).
		Str("correlation_id", "corr-1").Logger()
	s.Info().Str("class", "ok").Msg("after decode")
	old.Info().Str("class", "ok").Msg("after decode")
	s.Error().Msg("error")
	old.Error().Msg("error")
	oldLease := old.With().Int("attempt", 2).Logger()
	s.Warn().Int("attempt", 2).Str("why", "expired").Msg("lease lost") // an attempt's lease logs so
	oldLease.Warn().Str("why", "expired").Msg("lease lost")
	require.Equal(t, want.String(), got.String())

	off := r.deliveryLog(p, 8)
	r.log = r.log.Level(zerolog.WarnLevel)
	require.Nil(t, off.Info(), "a level that is off builds no event")
	var nop stateLog
	require.Nil(t, nop.Error(), "the zero stateLog logs nothing")
	var none *stateLog
	require.Nil(t, none.Warn(), "nor does a nil one (a lease made without a delivery)")
}
