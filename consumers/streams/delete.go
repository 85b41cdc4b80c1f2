package streams

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// DeleteMsg removes message seq from s; a message already gone (removed
// by another replica, an operator or retention) is not an error.
func DeleteMsg(ctx context.Context, s jetstream.Stream, seq uint64) error {
	err := s.DeleteMsg(ctx, seq)
	if err == nil {
		return nil
	}
	if _, gerr := s.GetMsg(ctx, seq); errors.Is(gerr, jetstream.ErrMsgNotFound) {
		return nil
	}
	return err
}
