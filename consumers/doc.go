// Package consumers is personaq's JetStream runtime: it provisions the
// streams and per-persona durable consumers and runs persona handlers on
// the messages a transport.Subscriber delivers through a watermill Router.
//
// One delivery runs top to bottom in Runtime.process (process.go), as
// stages that each either pass it on or return how it ends: decode, admit
// (flow control), begin (the ledger numbers and leases the attempt), invoke
// (the handler, under its timeout), decide (retry.Decide; no I/O).
//
// Where a message's fate is carried out: commit.go. Its commit is the one
// sequence that acts on an ending — flow control's feedback, the attempt
// recorded in the ledger, the quarantine record, the request's terminal
// record (written nowhere else for a delivery), then the settle through
// the typed calls of transport.Delivery:
//
//	succeeded             → terminal record, then Ack (DoubleAck, confirmed)
//	retry after D ≤ 5s    → RetryAfter: held by this replica (heartbeated),
//	                        plain Nak when due
//	retry after D > 5s    → RetryAfter: NakWithDelay(D)
//	quarantine/defer/…    → quarantine record, terminal record, then Term
//	released (shutdown,   → Release after a delay, attempt not counted
//	  running elsewhere)
//	ledger unreachable    → held (heartbeated) until it answers; nothing
//	                        more pulled meanwhile; nothing counted
//	lease lost            → Abandon: the message is left to the server
//
// Short delays are held because nats-server re-arms its redelivery timer
// on every nak: under a steady stream of naks a NakWithDelay comes back
// late. A held retry runs on the replica that held it.
//
// Concurrency comes from the subscriber's worker slots, not from Consume's
// callback (which runs on one goroutine): it fetches at most as many
// messages as it has free slots, so no message waits in a client buffer
// while its AckWait clock runs, and InProgress heartbeats keep a long
// attempt from being redelivered to another replica.
//
// What happens when Redis is down: ledgerwait.go. One policy for the
// attempt ledger, the rate limiter and the circuit store alike: work stops
// where it stands and resumes when Redis is back, no delivery is spent on
// the outage (nothing released, redelivered or quarantined because of it),
// a waiting caller is told why, and a step deadline that passes meanwhile
// ends the request saying the ledger was down. Redis errors are classified
// once, in package rdb.
//
// Flow control (package flow) sits at the pull: a persona's subscription
// asks its Gate before every fetch, so a request that its shared rate
// limiter or its open circuit would not let start is never pulled. A
// provider's 429 cools the limiter down for every replica; a high rate of
// provider failures over a window (answers naming a Retry-After are pacing
// and do not count) opens the circuit, which pauses the persona's consumer
// on the server until one half-open probe decides.
package consumers
