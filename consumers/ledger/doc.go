// Package ledger is personaq's attempt ledger in Redis: for every task step
// it keeps the attempt counter, the history of attempts (number, role, agent,
// class, error types, error text, feedback, progress, duration, time) and a
// completion marker. The retry decisions of package retry (agent
// alternation, plateau detection, error feedback) read this history, so they
// hold across replicas and restarts.
//
// # Why attempts are counted here
//
// JetStream counts deliveries, not attempts: a message redelivered because
// a replica drained on shutdown, or because Redis was briefly unreachable,
// would otherwise burn one of a persona's three attempts without the
// persona ever running. Here an attempt is a real handler invocation:
// Begin takes a number just before the handler runs, and Finish says whether
// it counted. An uncounted Finish (a snooze, or work released by shutdown or
// an infrastructure fault) gives the number back. The consumer's MaxDeliver
// stays only a safety net for crash loops.
//
// # Keys
//
// All keys of a task carry the task id as a Redis Cluster hash tag, so they
// live in one slot and one script may use them (braces in a task id are
// escaped; the prefix may not contain any):
//
//	<prefix>:{<task>}:<step>:meta      hash: counter, in-flight and released
//	                                   attempt numbers, completion marker
//	<prefix>:{<task>}:<step>:attempts  list: one JSON record per attempt,
//	                                   oldest first, trimmed to MaxHistory
//
// Both keys expire TTL (default 7 days) after the last write to the step.
//
// # Atomicity
//
// Each call (Begin, Finish, History) is one Lua script run with EVALSHA: one
// round trip, and no other client's command runs between its reads and
// writes, so replicas cannot interleave the steps of an attempt. The scripts
// touch only their KEYS, so they work on a plain Redis, behind Sentinel and
// on a Cluster (redis.UniversalClient), and on miniredis for `personaq dev`.
//
// A worker that dies mid-attempt leaves its attempt in flight. The next
// Begin on that step records it as lost (class retryable, error
// LostAttemptError), so the history stays honest and the attempt still
// counts. If the worker was not dead after all and finishes later, its
// Finish replaces the lost record.
//
// # Errors
//
// Every error that means Redis could not serve the call matches
// ErrUnavailable with errors.Is (and rdb.ErrUnavailable, as the flow
// stores' do: package rdb classifies every Redis error of both once);
// undecodable stored data matches ErrCorrupt.
// Callers never need go-redis types. The package does not log: the runtime
// logs its decisions.
package ledger
