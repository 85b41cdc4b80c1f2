package ledger

import (
	"context"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Steps lists the steps of a task that have a ledger entry, sorted. It
// SCANs (never KEYS) for the task's meta keys; on Cluster it scans every
// master, though the hash tag keeps them all in one slot.
func (l *Ledger) Steps(ctx context.Context, taskID string) ([]StepKey, error) {
	k := StepKey{TaskID: taskID}
	if err := k.validate(); err != nil {
		return nil, err
	}
	base := stepBase(l.cfg.Prefix, k)
	pattern := globEscaper.Replace(base) + "*:meta"
	var keys []string
	scan := func(ctx context.Context, c redis.UniversalClient) error {
		iter := c.Scan(ctx, 0, pattern, 200).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		return iter.Err()
	}
	var err error
	if cc, ok := l.cfg.Client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, l.cfg.Client)
	}
	if err != nil {
		return nil, l.wrap("steps "+taskID, err)
	}
	return stepsFromKeys(keys, base, taskID), nil
}

func stepsFromKeys(keys []string, base, taskID string) []StepKey {
	out := make([]StepKey, 0, len(keys))
	for _, key := range slices.Compact(slices.Sorted(slices.Values(keys))) {
		step := strings.TrimSuffix(strings.TrimPrefix(key, base), ":meta")
		out = append(out, StepKey{TaskID: taskID, Step: step})
	}
	return out
}

// globEscaper keeps SCAN MATCH from reading a task id as a pattern.
var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)
