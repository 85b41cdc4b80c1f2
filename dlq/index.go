package dlq

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// defaultIndexTTL is how long the second dedup layer remembers a record id.
const defaultIndexTTL = 7 * 24 * time.Hour

// index is the second dedup layer behind JetStream's Nats-Msg-Id window: a
// KV entry per record id saying "stored at quarantine seq N" (or "a writer
// is about to publish it", a reservation), so a retry that comes after the
// stream's duplicate window — a replica that stored the record, crashed
// before acking, and got the message again ten minutes later — still finds
// the record instead of writing a second one. It costs one KV get per
// quarantine write, plus two puts for a new record: quarantining is rare.
type index struct {
	js       jetstream.JetStream
	bucket   string
	ttl      time.Duration
	replicas int
	storage  jetstream.StorageType

	mu sync.Mutex
	kv jetstream.KeyValue
}

// indexEntry is the value stored under a record id.
type indexEntry struct {
	// Seq is the record's quarantine stream sequence; 0 marks a reservation
	// (a writer was about to publish at At).
	Seq uint64 `json:"seq,omitempty"`
	// FP fingerprints the quarantined message (subject and payload), so an
	// id reused for another message — a requests stream deleted and
	// recreated, its sequences starting over — is not taken for a duplicate.
	FP string    `json:"fp"`
	At time.Time `json:"at"`
}

func (ix *index) store(ctx context.Context) (jetstream.KeyValue, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.kv != nil {
		return ix.kv, nil
	}
	kv, err := ix.js.KeyValue(ctx, ix.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = ix.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      ix.bucket,
			Description: "personaq: quarantine record ids already stored (second dedup layer)",
			TTL:         ix.ttl, Replicas: ix.replicas, Storage: ix.storage,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = ix.js.KeyValue(ctx, ix.bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("quarantine index bucket %s: %w", ix.bucket, err)
	}
	ix.kv = kv
	return kv, nil
}

// get returns the entry of id, or nil when there is none.
func (ix *index) get(ctx context.Context, id string) (*indexEntry, error) {
	kv, err := ix.store(ctx)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, indexKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("quarantine index get %s: %w", id, err)
	}
	var v indexEntry
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return nil, nil // an unreadable entry is as good as none
	}
	return &v, nil
}

func (ix *index) put(ctx context.Context, id string, v indexEntry) error {
	kv, err := ix.store(ctx)
	if err != nil {
		return err
	}
	data, _ := json.Marshal(v)
	if _, err := kv.Put(ctx, indexKey(id), data); err != nil {
		return fmt.Errorf("quarantine index put %s: %w", id, err)
	}
	return nil
}

var kvKeyRE = regexp.MustCompile(`^[-/_=.a-zA-Z0-9]+$`)

// indexKey maps an id onto a valid KV key: as is when it can be, else a
// prefix and its URL-safe base64 (or a hash when that would be too long).
func indexKey(id string) string {
	if kvKeyRE.MatchString(id) && id[0] != '.' && id[len(id)-1] != '.' && len(id) <= 512 {
		return id
	}
	if len(id) <= 256 {
		return "b64." + base64.RawURLEncoding.EncodeToString([]byte(id))
	}
	sum := sha256.Sum256([]byte(id))
	return "h." + hex.EncodeToString(sum[:])
}

// fingerprint identifies the quarantined message itself.
func fingerprint(subject string, payload []byte) string {
	h := sha256.New()
	h.Write([]byte(subject))
	h.Write([]byte{0})
	h.Write(payload)
	return hex.EncodeToString(h.Sum(nil)[:12])
}
