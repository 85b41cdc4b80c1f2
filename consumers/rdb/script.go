package rdb

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Call is one script call of a Pipeline.
type Call struct {
	Script *redis.Script
	Keys   []string
	Args   []any
	// Cmd holds the call's reply once Pipeline returns.
	Cmd *redis.Cmd
}

// Pipeline runs calls on client, one pipeline of EVALSHA (a call alone is
// sent as Script.Run sends it), and returns when every Cmd holds its reply.
// A server without a script (new, restarted, flushed by SCRIPT FLUSH)
// answers NOSCRIPT; such a call did not run, and is sent again with its
// body (EVAL, which also caches it). Not SCRIPT LOAD then EVALSHA: a
// server still loading its data after a restart refuses the load, and the
// second EVALSHA failed the same way (seen after a Redis outage).
func Pipeline(ctx context.Context, client redis.UniversalClient, calls []*Call) {
	if len(calls) == 1 {
		c := calls[0]
		c.Cmd = c.Script.Run(ctx, client, c.Keys, c.Args...)
		return
	}
	_, _ = client.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for _, c := range calls {
			c.Cmd = c.Script.EvalSha(ctx, pl, c.Keys, c.Args...)
		}
		return nil
	})
	var again []*Call
	for _, c := range calls {
		if err := c.Cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			again = append(again, c)
		}
	}
	if len(again) == 0 {
		return
	}
	_, _ = client.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for _, c := range again {
			c.Cmd = c.Script.Eval(ctx, pl, c.Keys, c.Args...)
		}
		return nil
	})
}
