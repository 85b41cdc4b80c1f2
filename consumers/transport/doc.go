// Package transport adapts a JetStream durable pull consumer to watermill:
// Subscriber is a message.Subscriber whose topic is a persona, Publisher a
// message.Publisher that deduplicates by Nats-Msg-Id and reports what the
// server dropped.
//
// A subscription fetches at most as many messages as it has free slots
// (Config.Slots), so no message waits in a client buffer while its AckWait
// clock runs, and it heartbeats (InProgress) every message it holds, from
// receipt until it is settled. Each delivery carries a Delivery in its
// context (DeliveryFrom): the stream sequence, the delivery count, and this
// replica's claim on the message. A claim whose heartbeats were overdue is
// lost: the server may have handed the message to another replica, and
// since settles are matched by stream sequence alone, a lost claim settles
// nothing (ErrLeaseLost).
//
// It passes watermill's universal Pub/Sub suite (pubsub/tests.TestPubSub,
// run by pubsub_suite_test.go) as a plain watermill consumer uses it:
// msg.Ack() acks a delivered message on the server as Delivery.Ack does,
// msg.Nack() has it redelivered at once as Delivery.RetryAfter(0) does. A
// goroutine per message waits for that Ack or Nack; a consumer that
// settles every delivery itself, typed, sets Config.TypedSettleOnly and
// spares it (the personaq runtime, the advisory listener and the saga
// runner do): then a plain Ack or Nack settles nothing on the server.
//
// The typed path settles by calls on a delivery's Delivery, in the
// caller's goroutine, once:
//
//	Ack()                → DoubleAck (confirmed by the server)
//	Term(reason)         → TermWithReason
//	RetryAfter(d ≤ Config.HoldUnder), Release(d ≤ Config.HoldUnder)
//	                     → held by this replica, heartbeated, then a plain
//	                       Nak when due: nats-server re-arms its redelivery
//	                       timer on every nak, so under a steady stream of
//	                       naks a NakWithDelay comes back late
//	RetryAfter(d), Release(d), d > Config.HoldUnder
//	                     → NakWithDelay(d); d = 0: Nak (redelivered at once)
//	Abandon()            → nothing: the message is left to the server
//
// Each marks the watermill message acked (Ack, Term) or nacked (the
// others) too, so a plain Ack or Nack after it sends nothing more; a typed
// settle after a plain one is refused with ErrAlreadySettled.
//
// A router handler that does not settle its delivery is settled by the
// Settle middleware from what it returned (nil: Ack; an error: Nak).
// Whichever settles a delivery first — a typed call, the middleware, a
// plain Ack or Nack, or Close's release — is the one sent.
//
// Every settle is sent as a request and repeated until the server confirms
// it or the claim runs out. Close drains: in-flight messages get
// Config.DrainTimeout to finish, then their contexts are cancelled with
// ErrShuttingDown and the unsettled ones released.
//
// A subscription keeps of each fetched message only what settling it needs
// (its reply subject), not the jetstream.Msg: the parsed header map nats.go
// builds is often larger than the payload and would be held for as long
// as the message's work runs. Delivery.Header and HeaderGet give the
// headers as published, Delivery.Data the payload; Config.KeepMsg keeps
// the jetstream.Msg in Delivery.Msg for a consumer that settles through
// nats.go. A consumer that stops a delivery's work early with a cause of its
// own and still settles it uses Delivery.WorkCancel, and bounds what it
// does after the work with Delivery.HoldContext, which ends only when the
// claim is lost or the subscriber stops hard.
package transport
