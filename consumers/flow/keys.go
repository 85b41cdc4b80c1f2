package flow

// The keys of flow control. A limiter's keys share the hash tag {l:<name>}
// so one script may touch them all on Redis Cluster; a circuit is one key.
//
//	<prefix>:flow:{l:<name>}:req   requests' theoretical arrival time (µs, Redis clock)
//	<prefix>:flow:{l:<name>}:tok   tokens' theoretical arrival time (µs)
//	<prefix>:flow:{l:<name>}:cool  cool-down end (µs); absent: not cooling
//	<prefix>:flow:{c:<persona>}    circuit hash (see scripts.go)
func requestsKey(prefix, name string) string { return limiterBase(prefix, name) + ":req" }
func tokensKey(prefix, name string) string   { return limiterBase(prefix, name) + ":tok" }
func coolKey(prefix, name string) string     { return limiterBase(prefix, name) + ":cool" }
func circuitKey(prefix, persona string) string {
	return prefix + ":flow:{c:" + persona + "}"
}

func limiterBase(prefix, name string) string { return prefix + ":flow:{l:" + name + "}" }
