package retry

// SafeDelay exposes safeDelay to the external tests of the schedule checks.
var SafeDelay = safeDelay
