// Package rdb is personaq's one layer between its stores and Redis: the
// attempt ledger (consumers/ledger) and the flow stores (consumers/flow:
// rate limiters and circuits) build their clients, run their Lua scripts
// and classify Redis's errors here, so both read an outage the same way.
//
//   - NewClient and NewClientURL bound go-redis's slow defaults, so a call
//     against a stopped server fails within about 2 s.
//   - Pipeline runs script calls as one pipeline of EVALSHA and sends again
//     with EVAL the ones a server without the script refused (NOSCRIPT);
//     redis.Script.Run does the same for a call on its own.
//   - Errors.Wrap translates one call's error into its store's sentinels:
//     could not be reached or serve now (wrapping ErrUnavailable), a key
//     of another type, a caller that gave up, or anything else. Unavailable
//     is the one test callers use; none matches on go-redis types or text.
package rdb
