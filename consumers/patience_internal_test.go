package consumers

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func TestTransient(t *testing.T) {
	t.Parallel()
	api := func(code jetstream.ErrorCode) error {
		return fmt.Errorf("store terminal record: %w", &jetstream.APIError{Code: 503, ErrorCode: code})
	}
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"nil":                   {nil, false},
		"no leader (10008)":     {api(10008), true},
		"per-subject not ready": {api(10163), true},
		"incomplete results":    {api(10004), true},
		"wrong last sequence":   {api(jetstream.JSErrCodeStreamWrongLastSequence), false},
		"stream not found":      {api(jetstream.JSErrCodeStreamNotFound), false},
		"try timed out":         {fmt.Errorf("read: %w", context.DeadlineExceeded), true},
		"nats timeout":          {nats.ErrTimeout, true},
		"no responders":         {nats.ErrNoResponders, true},
		"no stream response":    {jetstream.ErrNoStreamResponse, true},
		"reconnecting":          {nats.ErrConnectionReconnecting, true},
		"caller cancelled":      {context.Canceled, false},
		"message not found":     {jetstream.ErrMsgNotFound, false},
		"a plain error":         {errors.New("bad record"), false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, transient(tc.err))
		})
	}
}

func TestPatiently(t *testing.T) {
	t.Parallel()
	noLeader := &jetstream.APIError{Code: 503, ErrorCode: 10008}
	t.Run("TriesAgainUntilTheFailoverEnds", func(t *testing.T) {
		t.Parallel()
		tries := 0
		err := patiently(context.Background(), recordPatience, func(context.Context) error {
			if tries++; tries < 3 {
				return noLeader
			}
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 3, tries)
	})
	t.Run("StopsAtAnErrorThatIsNotTransient", func(t *testing.T) {
		t.Parallel()
		tries, refused := 0, errors.New("refused")
		err := patiently(context.Background(), recordPatience, func(context.Context) error { tries++; return refused })
		require.ErrorIs(t, err, refused)
		require.Equal(t, 1, tries)
	})
	t.Run("GivesUpWhenTheCallerDoes", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
		defer cancel()
		tries := 0
		err := patiently(ctx, recordPatience, func(context.Context) error { tries++; return noLeader })
		require.ErrorIs(t, err, noLeader)
		require.GreaterOrEqual(t, tries, 2)
	})
	t.Run("GivesUpWhenItsPatienceEnds", func(t *testing.T) {
		t.Parallel()
		tries, start := 0, time.Now()
		err := patiently(context.Background(), 600*time.Millisecond, func(ctx context.Context) error {
			tries++
			dl, ok := ctx.Deadline()
			require.True(t, ok)
			require.False(t, dl.After(start.Add(650*time.Millisecond)), "a try outlasts the patience")
			return noLeader
		})
		require.ErrorIs(t, err, noLeader)
		require.GreaterOrEqual(t, tries, 2)
		require.Less(t, time.Since(start), patienceTry, "waited past its patience")
	})
	t.Run("EachTryIsBounded", func(t *testing.T) {
		t.Parallel()
		tries := 0
		err := patiently(context.Background(), recordPatience, func(ctx context.Context) error {
			if tries++; tries == 1 {
				dl, ok := ctx.Deadline()
				require.True(t, ok)
				require.LessOrEqual(t, time.Until(dl), patienceTry)
				return context.DeadlineExceeded // as if the try ran out
			}
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 2, tries)
	})
}
