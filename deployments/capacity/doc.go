// Package capacity turns a workload — requests per second, mean persona
// time, retry rate, output size — into what a personaq deployment needs:
// replicas and their slots, JetStream clusters, Redis masters and memory,
// and stream storage. Plan is a pure function of the Workload and the
// Figures measured on this project's benchmark machine (see Measured and
// deployments/CAPACITY.md for the commands that reproduce each one).
//
// `personaq capacity` prints a Plan.
package capacity
