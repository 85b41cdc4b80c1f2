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
var NATSClientLeaks = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"),
}
