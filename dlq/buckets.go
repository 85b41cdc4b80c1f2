package dlq

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// ProvisionBuckets creates the buckets the quarantine writer uses when
// they do not exist yet — the KV index (schemas.DefaultQuarantineIndexBucket) and the
// payload object store (schemas.DefaultQuarantinePayloadBucket) — with the given replicas
// and storage, exactly as the writer would on first use. Run by
// `personaq streams init`, so the first record written on a fresh cluster
// does not wait for (or, with a replica's narrower permissions, fail at)
// creating them. It is idempotent and leaves existing buckets as they are.
func ProvisionBuckets(ctx context.Context, js jetstream.JetStream, replicas int, storage jetstream.StorageType) error {
	idx := &index{js: js, bucket: schemas.DefaultQuarantineIndexBucket, ttl: defaultIndexTTL, replicas: replicas, storage: storage}
	if _, err := idx.store(ctx); err != nil {
		return err
	}
	obs := newObjects(js, schemas.DefaultQuarantinePayloadBucket)
	obs.replicas, obs.storage = replicas, storage
	_, err := obs.store(ctx, true)
	return err
}
