package retry

// plateauEligible reports whether an attempt may take part in plateau
// detection: it failed, its class counts (network does not, unless the
// policy says so), and it reported non-zero progress. Zero progress is not
// a plateau but a sign of an API or connection problem (seed 004 escalates it).
func plateauEligible(p Policy, a Attempt) bool {
	if !a.Progress.Known() || a.Progress.Completed == 0 {
		return false
	}
	if a.Class == ClassNetwork {
		return p.NetworkCountsTowardPlateau
	}
	return a.Class.countsTowardPlateau()
}

// plateau reports a plateau confirmed by the current attempt: enough
// eligible attempts stopped at its progress point and, with a fallback
// agent, both agents are among them.
func plateau(p Policy, in Input) (Progress, bool) {
	cur := in.Current
	if !plateauEligible(p, cur) {
		return Progress{}, false
	}
	need := in.PlateauAttempts
	if need <= 0 {
		need = DefaultPlateauAttempts
	}
	matches, roles := 0, map[Role]bool{}
	for _, a := range append(in.History[:len(in.History):len(in.History)], cur) {
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
func progressVaried(p Policy, in Input) bool {
	seen := map[int]bool{}
	for _, a := range append(in.History[:len(in.History):len(in.History)], in.Current) {
		if plateauEligible(p, a) {
			seen[a.Progress.Completed] = true
		}
	}
	return len(seen) > 1
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
