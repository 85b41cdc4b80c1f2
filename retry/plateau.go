package retry

import (
	"fmt"
	"strings"
)

// plateauEligible reports whether an attempt may take part in plateau
// detection: it failed, its class counts (network does not, unless the
// policy says so), and it reported non-zero progress. Zero progress is not
// a plateau but a sign of an API or connection problem (adaptive retry
// escalates it).
func plateauEligible(p Policy, a Attempt) bool {
	if !a.Progress.Known() || a.Progress.Completed == 0 {
		return false
	}
	if a.Class == ClassNetwork {
		return p.NetworkCountsTowardPlateau
	}
	return a.Class.countsTowardPlateau()
}

// confirmAttempt is the first attempt that may confirm a plateau: attempt
// PlateauConfirmAttempt, or the policy's last attempt when it has fewer.
func confirmAttempt(p Policy) int {
	return max(min(PlateauConfirmAttempt, p.MaxAttempts), 1)
}

// plateau reports a plateau confirmed by the last of all (the attempt that
// just ended): it is at or past confirmAttempt, enough eligible attempts
// stopped at its tasks_completed and, with a fallback agent, both agents
// are among them.
func plateau(p Policy, in Input, all []Attempt) (Progress, bool) {
	cur := all[len(all)-1]
	if !plateauEligible(p, cur) || cur.Number < confirmAttempt(p) {
		return Progress{}, false
	}
	need := in.PlateauAttempts
	if need <= 0 {
		need = DefaultPlateauAttempts
	}
	matches, roles := 0, map[Role]bool{}
	for _, a := range all {
		if plateauEligible(p, a) && a.Progress.Completed == cur.Progress.Completed {
			matches++
			roles[a.Role] = true
		}
	}
	if matches < need || (in.HasFallback && len(roles) < 2) {
		return Progress{}, false
	}
	return cur.Progress, true
}

// progressVaried reports whether eligible attempts stopped at two or more
// different progress points.
func progressVaried(p Policy, all []Attempt) bool {
	seen := map[int]bool{}
	for _, a := range all {
		if plateauEligible(p, a) {
			seen[a.Progress.Completed] = true
		}
	}
	return len(seen) > 1
}

// improved reports whether the last attempt of history completed more
// than the one before it, both having reported progress (the adaptive-retry
// row "progress > attempt_1").
func improved(history []Attempt) bool {
	if len(history) < 2 {
		return false
	}
	prev, cur := history[len(history)-2].Progress, history[len(history)-1].Progress
	return prev.Known() && cur.Known() && cur.Completed > prev.Completed
}

func anyProgress(all []Attempt) bool {
	for _, a := range all {
		if a.Progress.Known() {
			return true
		}
	}
	return false
}

// zeroProgress reports whether every attempt that reported progress
// completed nothing.
func zeroProgress(all []Attempt) bool {
	for _, a := range all {
		if a.Progress.Known() && a.Progress.Completed > 0 {
			return false
		}
	}
	return true
}

// progressStory says what the attempts' progress did, for an escalation's
// detail: "progress stayed at 5/9 on every attempt that reported it" or
// "variable but incomplete progress (2/9, 4/9, 3/9)".
func progressStory(all []Attempt) string {
	var points []string
	seen := map[int]bool{}
	for _, a := range all {
		if a.Progress.Known() {
			points = append(points, fmt.Sprintf("%d/%d", a.Progress.Completed, a.Progress.Total))
			seen[a.Progress.Completed] = true
		}
	}
	if len(seen) == 1 {
		return fmt.Sprintf("progress stayed at %s on every attempt that reported it, but no plateau was confirmed", points[0])
	}
	return fmt.Sprintf("variable but incomplete progress (%s)", strings.Join(points, ", "))
}
