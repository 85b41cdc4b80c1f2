package cli

import "github.com/rs/zerolog"

// logDevBudgets writes each demo persona's step budget at the start of
// `dev`, the same two lines `serve` writes for its personas (logBudgets):
// "Calculated PersonaRequestStep timeout…" and "Step timeout configured".
func logDevBudgets(log zerolog.Logger, timeScale float64) {
	logBudgets(log, demoPersonas(timeScale))
}
