package testenv

import "go.uber.org/goleak"

// NATSClientLeaks are the goroutines nats.go itself can leave behind, for
// goleak.VerifyTestMain: jetstream's ObjectStore.Put publishes its chunks
// asynchronously on a JetStream of its own and cleans its reply
// subscription up when it returns, setting the status channel to nil; the
// goroutine that async publishing started to watch that channel may not
// have read it yet, and then waits on a nil channel for ever
// (jetstream/object.go, cleanupReplySub; nats.go v1.55.0). It happens
// whenever a Put (a large output, a large quarantined payload) returns
// before that goroutine was first scheduled.
//
// It also holds two goroutines of the in-process nats-server itself, seen
// after a test's server had been shut down and waited for (Stop): a file
// store's state-flush loop (server/filestore.go, flushStreamStateLoop) and
// the access-time ticker that runs while any file store is registered
// (server/ats). They are the server's, not personaq's: a store the server
// created while it was shutting down (a replica still provisioning at a
// test's cleanup) is left registered.
var NATSClientLeaks = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"),
	goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
	goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
}
