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
package consumers
