package consumers

import (
	"time"

	"github.com/personaq/personaq/dlq"
)

// Freeze suppresses (true) or resumes (false) this runtime's heartbeats and
// lease renewals: to the other replicas and the servers it then looks like a
// process stopped by SIGSTOP, a long GC pause or a partition, while its
// handlers run on.
func (r *Runtime) Freeze(frozen bool) { r.frozen.Store(frozen) }

// QuarantineStep is a step of the quarantine path (see quarantineStep).
type QuarantineStep = quarantineStep

// The steps CrashQuarantineAt can crash a delivery after.
const (
	StepDecided         = stepDecided
	StepRecordPublished = stepRecordPublished
	StepRecordIndexed   = stepRecordIndexed
	StepConcluded       = stepConcluded
)

// CrashQuarantineAt arms a simulated crash: the next delivery of this
// runtime that reaches step of the quarantine path is abandoned there
// without settling (no ack, nak or term; heartbeats stop), as a SIGKILL
// would leave it. Call it before Run.
func (r *Runtime) CrashQuarantineAt(step QuarantineStep) {
	r.crashAt.Store(int32(step))
	if step == stepRecordPublished {
		r.dlq = r.newWriter(dlq.WithPublishedHook(r.crashAfterPublish))
	}
}

// CrashArmed reports whether a crash armed by CrashQuarantineAt has not
// happened yet.
func (r *Runtime) CrashArmed() bool { return r.crashAt.Load() != int32(stepNone) }

// SetRetryLead sets the most a retry's message is asked back before it is
// due (30 ms by default). Call it before Run.
func (r *Runtime) SetRetryLead(d time.Duration) { r.leadMax = d }

// SetBacklogInterval sets how often the runnable backlog is measured. Call
// it before Run.
func (r *Runtime) SetBacklogInterval(d time.Duration) { r.backlogEvery = d }
