package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/personaq/personaq/retry"
)

func init() { register(newPolicyCmd) }

func newPolicyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "Inspect retry policies"}
	cmd.AddCommand(newPolicyExplainCmd(g))
	return cmd
}

func newPolicyExplainCmd(g *globals) *cobra.Command {
	var persona, preset, output string
	cmd := &cobra.Command{
		Use:   "explain [--persona P] [--preset NAME]",
		Short: "Print a policy's schedule and step budget (per-attempt timeout, each backoff, total)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			policies, err := explainTargets(persona, preset)
			if err != nil {
				return err
			}
			return writeExplanations(g.stdout, output, policies)
		},
	}
	cmd.Flags().StringVar(&persona, "persona", "", "persona whose timeout applies (default: every built-in persona)")
	cmd.Flags().StringVar(&preset, "preset", "", "preset: "+fmt.Sprint(retry.PresetNames())+" (default: persona)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output: text|json")
	return cmd
}

// explainTargets resolves the policies to explain; persona timeouts honour
// PERSONA_TIMEOUTS_JSON like the runtime does.
func explainTargets(persona, preset string) ([]retry.Policy, error) {
	defaults := retry.NewPersonaDefaults()
	if v := os.Getenv(retry.PersonaTimeoutsEnv); v != "" {
		over, err := retry.ParsePersonaTimeoutsJSON(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", retry.PersonaTimeoutsEnv, err)
		}
		defaults = defaults.Merge(over)
	}
	personas := []string{persona}
	if persona == "" {
		personas = slices.Sorted(func(yield func(string) bool) {
			for name := range defaults.Timeouts {
				if !yield(name) {
					return
				}
			}
		})
	}
	var out []retry.Policy
	for _, name := range personas {
		p, err := policyFor(defaults, name, preset)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func policyFor(defaults retry.PersonaDefaults, persona, preset string) (retry.Policy, error) {
	p := defaults.Policy(persona)
	if preset == "" || preset == p.Name {
		return p, nil
	}
	named, err := retry.Preset(preset)
	if err != nil {
		return retry.Policy{}, fmt.Errorf("invalid flag --preset: %w", err)
	}
	named.AttemptTimeout, named.Persona = p.AttemptTimeout, persona
	return named, nil
}

func writeExplanations(w io.Writer, output string, policies []retry.Policy) error {
	switch output {
	case "json":
		all := make([]retry.Explanation, len(policies))
		for i, p := range policies {
			all[i] = retry.Explain(p)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	case "text":
		for i, p := range policies {
			if i > 0 {
				fmt.Fprintln(w)
			}
			if err := retry.Explain(p).WriteText(w); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("invalid flag --output: %q (want text|json)", output)
}
