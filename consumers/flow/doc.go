// Package flow is personaq's flow control toward AI providers: rate
// limiters shared by every replica, the cool-down a provider's 429 asks
// for, and a circuit breaker per persona.
//
// A Limiter holds named limits (requests and tokens per minute, as a
// provider enforces them per model or API key) in Redis. Its state is a
// generic cell rate algorithm (GCRA) per dimension plus a cool-down key,
// read and reserved by one Lua script: one round trip admits up to n
// requests, or says how long to wait. Reservations not used are given
// back (Release); a request's token estimate is reconciled with what it
// really used (Settle). Every replica shares the same clock: Redis's.
//
// Circuits holds each persona's circuit state in Redis so that every
// replica sees an open circuit, and exactly one replica at a time gets the
// half-open probe. Breaker measures one replica's provider failure rate
// over a window and Status.Pull says what a replica may pull; both are
// pure.
package flow
