package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// `personaq dev` runs its attempt ledger in process; it writes the address
// into a small KV bucket on its own NATS server so `task show` (and other
// ledger readers) find it with no flags.
const (
	devBucket    = "PERSONAQ_DEV"
	devLedgerKey = "ledger_redis_url"
)

func announceDevLedger(ctx context.Context, js jetstream.JetStream, url string) error {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: devBucket, Description: "personaq dev: where the in-process attempt ledger listens",
		Storage: jetstream.MemoryStorage,
	})
	if err != nil {
		return fmt.Errorf("announce dev ledger: %w", err)
	}
	if _, err := kv.PutString(ctx, devLedgerKey, url); err != nil {
		return fmt.Errorf("announce dev ledger: %w", err)
	}
	return nil
}

// devLedgerURL returns the ledger address a running `personaq dev` announced
// on the NATS server at g.natsURL, or "" when there is none.
func devLedgerURL(ctx context.Context, g *globals) (string, error) {
	nc, js, err := g.connect(ctx)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	kv, err := js.KeyValue(ctx, devBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	e, err := kv.Get(ctx, devLedgerKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(e.Value()), nil
}
