package dlq

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// objects is the JetStream object store where a record keeps what does not
// fit in its own message: the payload of a request near the server's
// max_payload, or headers as large. The record references the object
// (bucket, name, size, digest); readers check both before handing the
// bytes back.
type objects struct {
	js       jetstream.JetStream
	bucket   string
	replicas int
	storage  jetstream.StorageType

	mu  sync.Mutex
	obs jetstream.ObjectStore
}

func newObjects(js jetstream.JetStream, bucket string) *objects {
	return &objects{js: js, bucket: bucket, replicas: 1, storage: jetstream.FileStorage}
}

// store opens the bucket, creating it when create is set and it does not
// exist yet.
func (o *objects) store(ctx context.Context, create bool) (jetstream.ObjectStore, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.obs != nil {
		return o.obs, nil
	}
	obs, err := o.js.ObjectStore(ctx, o.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && create {
		obs, err = o.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:      o.bucket,
			Description: "personaq: quarantined payloads and headers too large to keep inside their record",
			Replicas:    o.replicas, Storage: o.storage,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			obs, err = o.js.ObjectStore(ctx, o.bucket)
		}
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w: object store %s does not exist", ErrPayloadMissing, o.bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("quarantine payload store %s: %w", o.bucket, err)
	}
	o.obs = obs
	return obs, nil
}

// put stores data under name, unless an object with the same content is
// there already (another replica wrote the same record), and returns its
// reference.
func (o *objects) put(ctx context.Context, name string, data []byte) (*schemas.PayloadRef, error) {
	obs, err := o.store(ctx, true)
	if err != nil {
		return nil, err
	}
	ref := &schemas.PayloadRef{Bucket: o.bucket, Name: name, Size: int64(len(data)), Digest: digest(data)}
	if info, err := obs.GetInfo(ctx, name); err == nil && info.Digest == ref.Digest && int64(info.Size) == ref.Size {
		return ref, nil
	}
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: name}, bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("store %s in object store %s: %w", name, o.bucket, err)
	}
	return ref, nil
}

// get reads the object ref names and checks its size and digest.
func (o *objects) get(ctx context.Context, ref *schemas.PayloadRef) ([]byte, error) {
	obs, err := o.storeFor(ctx, ref)
	if err != nil {
		return nil, err
	}
	data, err := obs.GetBytes(ctx, ref.Name)
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return nil, fmt.Errorf("%w: %s in object store %s", ErrPayloadMissing, ref.Name, ref.Bucket)
	case errors.Is(err, jetstream.ErrDigestMismatch):
		return nil, fmt.Errorf("%w: %s in object store %s: %w", ErrPayloadCorrupt, ref.Name, ref.Bucket, err)
	case err != nil:
		return nil, fmt.Errorf("read %s from object store %s: %w", ref.Name, ref.Bucket, err)
	}
	if int64(len(data)) != ref.Size || digest(data) != ref.Digest {
		return nil, fmt.Errorf("%w: %s in object store %s has %d bytes, digest %s; the record says %d bytes, %s",
			ErrPayloadCorrupt, ref.Name, ref.Bucket, len(data), digest(data), ref.Size, ref.Digest)
	}
	return data, nil
}

// delete removes the object ref names; one already gone is not an error.
func (o *objects) delete(ctx context.Context, ref *schemas.PayloadRef) error {
	obs, err := o.storeFor(ctx, ref)
	if errors.Is(err, ErrPayloadMissing) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := obs.Delete(ctx, ref.Name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("delete %s from object store %s: %w", ref.Name, ref.Bucket, err)
	}
	return nil
}

// storeFor opens the bucket a reference names (a record written with
// another bucket configured keeps pointing at its own).
func (o *objects) storeFor(ctx context.Context, ref *schemas.PayloadRef) (jetstream.ObjectStore, error) {
	if ref.Bucket == o.bucket || ref.Bucket == "" {
		return o.store(ctx, false)
	}
	return newObjects(o.js, ref.Bucket).store(ctx, false)
}

// size is how many bytes the bucket holds; 0 when it does not exist.
func (o *objects) size(ctx context.Context) (uint64, error) {
	obs, err := o.store(ctx, false)
	if errors.Is(err, ErrPayloadMissing) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	st, err := obs.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("quarantine payload store %s: %w", o.bucket, err)
	}
	return st.Size(), nil
}

// digest is the object store's own digest of data ("SHA-256=<base64url>").
func digest(data []byte) string {
	h := sha256.New()
	h.Write(data)
	return jetstream.GetObjectDigestValue(h)
}
