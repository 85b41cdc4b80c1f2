package consumers

// Freeze suppresses (true) or resumes (false) this runtime's heartbeats and
// lease renewals: to the other replicas and the servers it then looks like a
// process stopped by SIGSTOP, a long GC pause or a partition, while its
// handlers run on.
func (r *Runtime) Freeze(frozen bool) { r.frozen.Store(frozen) }
