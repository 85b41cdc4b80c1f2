package client_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

// TestSubmitPublishesTheQueuedEvent: after the request is stored, its
// queued event is on the attempts stream with the deadline, created_at and
// digest; the terminal record carries the same digest.
func TestSubmitPublishesTheQueuedEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.serve(consumers.Config{}, consumers.Persona{Name: "planner", Handler: echoOutput(3), Policy: policy(2, 5*time.Second)})
	req := schemas.NewRequest("story-q", "plan", "planner")
	req.Input = json.RawMessage(`{"b":1,"a":2}`)
	deadline := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	sub, err := e.c.Submit(context.Background(), req, client.WithDeadline(deadline))
	require.NoError(t, err)
	require.False(t, sub.Duplicate)
	require.Equal(t, schemas.RequestDigest(req), sub.Digest)

	q, err := wire.NewSubmitter(e.js, wire.Topology{}, nil).Queued(context.Background(), req.RequestID)
	require.NoError(t, err)
	require.Equal(t, schemas.AttemptQueued, q.Kind)
	require.Equal(t, 0, q.Attempt)
	require.Equal(t, "story-q", q.TaskID)
	require.Equal(t, "plan", q.Step)
	require.Equal(t, "planner", q.Persona)
	require.True(t, deadline.Equal(q.Deadline), "deadline %s, want %s", q.Deadline, deadline)
	require.True(t, req.CreatedAt.Equal(q.CreatedAt))
	require.Equal(t, sub.Digest, q.RequestDigest)

	res, err := e.c.Await(context.Background(), req.RequestID)
	require.NoError(t, err)
	require.Equal(t, sub.Digest, res.Record.RequestDigest, "the terminal record carries the digest")
}

// TestSubmitIdempotentOrConflict: the same request id with the same content
// is the first submission (its deadline); with other content it is a
// *ConflictError, before and after the request ended, and after the
// attempts stream forgot it (the terminal record's digest decides).
func TestSubmitIdempotentOrConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.serve(consumers.Config{}, consumers.Persona{Name: "planner", Handler: echoOutput(3), Policy: policy(2, 5*time.Second)})
	ctx := context.Background()
	req := schemas.NewRequest("story-c", "plan", "planner")
	req.Input = json.RawMessage(`{"n":1}`)
	first := time.Now().Add(time.Minute).UTC()
	sub, err := e.c.Submit(ctx, req, client.WithDeadline(first))
	require.NoError(t, err)

	again := *req
	again.CreatedAt = time.Now().Add(time.Second) // not content
	dup, err := e.c.Submit(ctx, &again, client.WithDeadline(first.Add(time.Hour)))
	require.NoError(t, err)
	require.True(t, dup.Duplicate)
	require.True(t, first.Equal(dup.Deadline), "the first submission's deadline stands")

	other := *req
	other.Input = json.RawMessage(`{"n":2}`)
	_, err = e.c.Submit(ctx, &other)
	require.ErrorIs(t, err, client.ErrConflict)
	var ce *client.ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, sub.Digest, ce.StoredDigest)
	require.NotNil(t, ce.Queued)
	require.Equal(t, "story-c", ce.Queued.TaskID)

	_, err = e.c.Await(ctx, req.RequestID)
	require.NoError(t, err)
	// Forget the attempt events: the terminal record still refuses.
	st, err := e.js.Stream(ctx, wire.Topology{}.WithDefaults().AttemptsStream)
	require.NoError(t, err)
	require.NoError(t, st.Purge(ctx))
	_, err = e.c.Submit(ctx, &other)
	require.ErrorAs(t, err, &ce)
	require.NotNil(t, ce.Record)
	require.Nil(t, ce.Queued)
	dup, err = e.c.Submit(ctx, req)
	require.NoError(t, err)
	require.True(t, dup.Duplicate)
	require.Len(t, e.records(req.RequestID), 1, "nothing ran twice")
}

// TestSubmitConflictWhileStoredWithoutQueuedEvent: a request stored by a
// raw publisher (no queued event) is compared with the stored message the
// duplicate PubAck points at.
func TestSubmitConflictWhileStoredWithoutQueuedEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.serve(consumers.Config{}, consumers.Persona{Name: "planner", Handler: echoOutput(1), Policy: policy(2, time.Second)})
	ctx := context.Background()
	require.NoError(t, e.js.DeleteConsumer(ctx, wire.Topology{}.WithDefaults().RequestsStream, wire.Durable("planner")))
	req := schemas.NewRequest("story-raw", "plan", "planner")
	ack, err := wire.PublishRequest(ctx, e.js, wire.Topology{}, req)
	require.NoError(t, err)
	other := *req
	other.Step = "review"
	_, err = e.c.Submit(ctx, &other, client.SkipPersonaCheck())
	var ce *client.ConflictError
	require.ErrorAs(t, err, &ce)
	require.NotNil(t, ce.Stored)
	require.Equal(t, "plan", ce.Stored.Step)

	dup, err := e.c.Submit(ctx, req, client.SkipPersonaCheck())
	require.NoError(t, err)
	require.True(t, dup.Duplicate)
	require.Equal(t, ack.Sequence, dup.Sequence)
	_, err = wire.NewSubmitter(e.js, wire.Topology{}, nil).Queued(ctx, req.RequestID)
	require.NoError(t, err, "the missing queued event was published")
}
