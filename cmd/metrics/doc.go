// Package metrics exposes a personaq replica to Prometheus and to probes.
//
// Metrics implements consumers.Observer: pass it as consumers.Config.Observer
// and the runtime counts attempts, terminal outcomes, quarantine records,
// handler durations, in-flight attempts, redelivery lateness, ledger
// round trips and the terminal records' batch commits. Server serves, on one listener:
//
//	/metrics  the registry, in the Prometheus text or OpenMetrics format
//	/healthz  200 while the process runs (liveness)
//	/readyz   200 when the NATS connection is CONNECTED, the runtime's
//	          consumers are bound and its ledger answers; otherwise 503 with
//	          a one-line reason (readiness)
//
// Metric names (all prefixed personaq_):
//
//	attempts_total{persona,class}              counter: handler invocations by outcome class
//	outcomes_total{persona,outcome,reason}     counter: requests reaching a terminal state
//	quarantined_total{persona,reason}          counter: quarantine records (every outcome but succeeded)
//	handler_duration_seconds{persona}          histogram: one attempt's handler time
//	in_flight{persona}                         gauge: attempts running now
//	redelivery_lateness_seconds{persona}       histogram: actual − requested retry delay (early clamps to 0)
//	redelivery_early_total{persona}            counter: retries that arrived before their delay
//	ledger_round_trip_seconds{op}              histogram: one Redis ledger call (begin, finish)
//	ledger_errors_total{op}                    counter: ledger calls that failed
//	record_batch_records                       histogram: terminal records per atomic batch commit (per fsync)
//	record_batch_duration_seconds              histogram: one batch commit, sent to confirmed
//	record_batches_refused_total               counter: batches refused, their records written one by one
//
// New also registers the standard process_* and go_* collectors.
package metrics
