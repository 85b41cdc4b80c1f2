// Package consumers is personaq's JetStream runtime: it provisions the
// streams and per-persona durable consumers, adapts nats.go's jetstream pull
// API to a watermill message.Subscriber, and runs persona handlers through a
// watermill Router whose middleware classifies each attempt, asks the retry
// package what to do, and settles the message:
//
//	succeeded           → DoubleAck (confirmed), outcome event
//	retry after D       → NakWithDelay(D) (watermill Nack with delay metadata)
//	quarantine/defer/…  → record stored on the quarantine stream, then Term
//	shutdown mid-attempt→ Nak without delay, attempt not counted
//
// Concurrency comes from our own worker slots, not from Consume's callback
// (which runs on one goroutine): the subscriber fetches at most as many
// messages as it has free slots, so no message waits in a client buffer
// while its AckWait clock runs, and InProgress heartbeats keep a long
// attempt from being redelivered to another replica.
//
// Flow control (package flow) sits at the pull: a persona's subscription
// asks its Gate before every fetch, so a request that its shared rate
// limiter or its open circuit would not let start is never pulled. A
// provider's 429 cools the limiter down for every replica; consecutive
// provider failures open the circuit, which pauses the persona's consumer
// on the server until one half-open probe decides.
package consumers
