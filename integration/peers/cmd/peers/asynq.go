package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// asynq (github.com/hibiken/asynq) against a redis-server with appendonly
// yes and appendfsync always, started by the driver.
//
// It polls: the processor looks for a task every TaskCheckInterval when the
// queue is empty (default 1 s) and the forwarder moves due retries every
// DelayedTaskCheckInterval (default 5 s). Both are set to asynqPoll here, as
// River's tuned run polls every riverTunedPoll; at the defaults a retry
// asked for 1 s later runs up to 5 s late. asynq stores a retry's due time
// in whole seconds, so a retry can also run up to 1 s early.
const asynqPoll = 10 * time.Millisecond

const asynqQueue = "default"

type asynqQueueImpl struct {
	opt    asynq.RedisClientOpt
	rdb    *redis.Client
	client *asynq.Client
	srv    *asynq.Server
	mux    *asynq.ServeMux
}

type asynqJob struct {
	ID    string          `json:"id"`
	Input json.RawMessage `json:"input"`
}

func openAsynq(ctx context.Context, tc trialConfig, h handlerFunc) (queue, error) {
	q := &asynqQueueImpl{opt: asynq.RedisClientOpt{Addr: tc.redisAddr}}
	q.rdb = redis.NewClient(&redis.Options{Addr: tc.redisAddr})
	if err := q.rdb.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	q.client = asynq.NewClient(q.opt)
	q.mux = asynq.NewServeMux()
	q.mux.HandleFunc("noop", func(ctx context.Context, t *asynq.Task) error {
		var j asynqJob
		if err := json.Unmarshal(t.Payload(), &j); err != nil {
			return err
		}
		n, _ := asynq.GetRetryCount(ctx)
		return h(j.ID, n+1)
	})
	q.srv = asynq.NewServer(q.opt, asynq.Config{
		Concurrency:              tc.workers,
		Queues:                   map[string]int{asynqQueue: 1},
		RetryDelayFunc:           func(int, error, *asynq.Task) time.Duration { return retryDelay },
		TaskCheckInterval:        asynqPoll,
		DelayedTaskCheckInterval: asynqPoll,
		LogLevel:                 asynq.FatalLevel,
	})
	return q, nil
}

// enqueue stores the tasks from 16 goroutines (each Enqueue is one round
// trip and one fsync).
func (q *asynqQueueImpl) enqueue(ctx context.Context, ids []string) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, id := range ids {
		body, err := json.Marshal(asynqJob{ID: id, Input: payload})
		if err != nil {
			return err
		}
		g.Go(func() error {
			_, err := q.client.EnqueueContext(ctx, asynq.NewTask("noop", body), asynq.Queue(asynqQueue), asynq.MaxRetry(3))
			return err
		})
	}
	return g.Wait()
}

func (q *asynqQueueImpl) start(context.Context) error { return q.srv.Start(q.mux) }

// pending counts the queue's pending, active and retrying tasks (a
// succeeded task is deleted at once: no Retention).
func (q *asynqQueueImpl) pending(ctx context.Context) (int, error) {
	key := func(k string) string { return fmt.Sprintf("asynq:{%s}:%s", asynqQueue, k) }
	pipe := q.rdb.Pipeline()
	p := pipe.LLen(ctx, key("pending"))
	a := pipe.LLen(ctx, key("active"))
	r := pipe.ZCard(ctx, key("retry"))
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	return int(p.Val() + a.Val() + r.Val()), nil
}

func (q *asynqQueueImpl) close() {
	q.srv.Shutdown()
	_ = q.client.Close()
	_ = q.rdb.Close()
}
