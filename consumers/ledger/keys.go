package ledger

import (
	"fmt"
	"strings"
)

// StepKey names one step of one task: the unit whose attempts are counted.
type StepKey struct {
	// TaskID is required.
	TaskID string
	// Step may be empty for single-step tasks.
	Step string
}

func (k StepKey) String() string { return k.TaskID + "/" + k.Step }

func (k StepKey) validate() error {
	if k.TaskID == "" {
		return fmt.Errorf("%w: task id: required", ErrInvalidArgument)
	}
	return nil
}

// The keys of one step. The task id is the Cluster hash tag, so every key of
// a task lives in one slot and one script may touch them all.
//
//	<prefix>:{<task>}:<step>:meta      hash (see scripts.go for its fields)
//	<prefix>:{<task>}:<step>:attempts  list of JSON attempt records, oldest first
//	<prefix>:{<task>}:<step>:lease     "<token>|<attempt>" of the attempt running now
//	<prefix>:epoch                     when this data set began (unix ms)
func leaseKey(prefix string, k StepKey) string { return stepBase(prefix, k) + leaseSuffix }
func epochKey(prefix string) string            { return prefix + ":epoch" }

const (
	metaSuffix     = ":meta"
	attemptsSuffix = ":attempts"
	leaseSuffix    = ":lease"
)

func stepBase(prefix string, k StepKey) string {
	return prefix + ":{" + escapeTag(k.TaskID) + "}:" + k.Step
}

// tagEscaper keeps braces out of the hash tag: a '}' in a task id would end
// the tag early and let two different (task, step) pairs share a key.
var tagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

func escapeTag(s string) string {
	if !strings.ContainsAny(s, "%{}") {
		return s // the common task id: no replacer pass
	}
	return tagEscaper.Replace(s)
}

// stepKeys returns the meta, attempts and lease keys of a step, in that
// order (the scripts' KEYS), with room for one more key: Begin and Finish
// build them per call, so the three share one allocation.
func stepKeys(prefix string, k StepKey) []string {
	tag := escapeTag(k.TaskID)
	base := len(prefix) + len(":{") + len(tag) + len("}:") + len(k.Step)
	var b strings.Builder
	b.Grow(3*base + len(metaSuffix) + len(attemptsSuffix) + len(leaseSuffix))
	var ends [3]int
	for i, suffix := range [3]string{metaSuffix, attemptsSuffix, leaseSuffix} {
		b.WriteString(prefix)
		b.WriteString(":{")
		b.WriteString(tag)
		b.WriteString("}:")
		b.WriteString(k.Step)
		b.WriteString(suffix)
		ends[i] = b.Len()
	}
	all := b.String()
	keys := make([]string, 3, 4)
	keys[0], keys[1], keys[2] = all[:ends[0]], all[ends[0]:ends[1]], all[ends[1]:]
	return keys
}
