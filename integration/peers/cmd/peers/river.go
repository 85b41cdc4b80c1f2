package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
)

// River (github.com/riverqueue/river) on PostgreSQL with fsync=on and
// synchronous_commit=on, started by the driver, through pgx v5.
//
// river-default runs River's defaults: FetchCooldown 100 ms (at most one
// fetch of up to MaxWorkers jobs per 100 ms) and FetchPollInterval 1 s.
// river-tuned sets FetchCooldown to 1 ms (River's minimum) and
// FetchPollInterval to riverTunedPoll.
const riverTunedPoll = 10 * time.Millisecond

// riverPoolConns is the pgx pool size (pgxpool's default is max(4, CPUs)).
const riverPoolConns = 20

type riverArgs struct {
	ID    string          `json:"id"`
	Input json.RawMessage `json:"input"`
}

func (riverArgs) Kind() string { return "noop" }

type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	h handlerFunc
}

func (w *riverWorker) Work(_ context.Context, job *river.Job[riverArgs]) error {
	return w.h(job.Args.ID, job.Attempt)
}

// riverRetry asks for every retry retryDelay after the failure.
type riverRetry struct{}

func (riverRetry) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(retryDelay) }

type riverQueueImpl struct {
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
}

func openRiverDefault(ctx context.Context, tc trialConfig, h handlerFunc) (queue, error) {
	return openRiver(ctx, tc, h, 0, 0)
}

func openRiverTuned(ctx context.Context, tc trialConfig, h handlerFunc) (queue, error) {
	return openRiver(ctx, tc, h, time.Millisecond, riverTunedPoll)
}

func openRiver(ctx context.Context, tc trialConfig, h handlerFunc, cooldown, poll time.Duration) (queue, error) {
	pc, err := pgxpool.ParseConfig(tc.pgURL)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = riverPoolConns
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	q := &riverQueueImpl{pool: pool}
	driver := riverpgxv5.New(pool)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: quietLogger()})
	if err != nil {
		q.close()
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		q.close()
		return nil, err
	}
	if _, err := pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		q.close()
		return nil, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{h: h})
	q.client, err = river.NewClient(driver, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: tc.workers}},
		Workers:           workers,
		RetryPolicy:       riverRetry{},
		FetchCooldown:     cooldown,
		FetchPollInterval: poll,
		Logger:            quietLogger(),
	})
	if err != nil {
		q.close()
		return nil, err
	}
	return q, nil
}

// enqueue inserts the jobs in batches of 1,000 (InsertManyFast: COPY FROM).
func (q *riverQueueImpl) enqueue(ctx context.Context, ids []string) error {
	for len(ids) > 0 {
		n := min(len(ids), 1000)
		params := make([]river.InsertManyParams, n)
		for i, id := range ids[:n] {
			params[i] = river.InsertManyParams{Args: riverArgs{ID: id, Input: payload}}
		}
		if _, err := q.client.InsertManyFast(ctx, params); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

func (q *riverQueueImpl) start(ctx context.Context) error {
	return q.client.Start(context.WithoutCancel(ctx))
}

// pending counts jobs not yet completed (the completer stores completions
// in batches, so the handler returning is not yet the job settled).
func (q *riverQueueImpl) pending(ctx context.Context) (int, error) {
	var n int
	err := q.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state <> 'completed'").Scan(&n)
	return n, err
}

func (q *riverQueueImpl) close() {
	if q.client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_ = q.client.Stop(ctx)
		cancel()
	}
	q.pool.Close()
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
