package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/personaq/personaq/cmd/config"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

func init() { register(newPolicyCmd) }

func newPolicyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "Inspect retry policies"}
	cmd.AddCommand(newPolicyExplainCmd(g))
	return cmd
}

// explainFlags are policy explain's flags.
type explainFlags struct {
	persona, preset, configPath, request, output string
}

func newPolicyExplainCmd(g *globals) *cobra.Command {
	var f explainFlags
	cmd := &cobra.Command{
		Use:   "explain [--persona P] [--preset NAME] [--config FILE] [--request JSON|@file|-]",
		Short: "Print a policy's schedule and step budget (per-attempt timeout, each backoff, total)",
		Long: "Print the retry policy a persona runs under and its step budget: every retry with its wait\n" +
			"and agent, the total backoff and the step deadline ((maxRetries+1) × timeout + backoff + 30s).\n\n" +
			"With --config the personas, timeouts and policies come from the configuration file (with its\n" +
			"environment overrides, as `serve` sees them); without it, from the built-in persona timeouts and\n" +
			"PERSONA_TIMEOUTS_JSON. With --request the policy is the one that request would run under: its\n" +
			"persona, its named policy and its policy_overrides.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			policies, err := f.targets(cmd.InOrStdin())
			if err != nil {
				return err
			}
			return writeExplanations(g.stdout, f.output, policies)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.persona, "persona", "", "persona whose timeout applies (default: every persona)")
	fl.StringVar(&f.preset, "preset", "", "preset: "+fmt.Sprint(retry.PresetNames())+" (default: the persona's)")
	fl.StringVarP(&f.configPath, "config", "c", "", "configuration file whose personas and policies to explain")
	fl.StringVar(&f.request, "request", "", "a persona request (JSON text, @file, or - for stdin): explain the policy it would run under")
	fl.StringVarP(&f.output, "output", "o", "text", "output: text|json")
	return cmd
}

// targets resolves the policies to explain.
func (f explainFlags) targets(stdin io.Reader) ([]retry.Policy, error) {
	req, err := readExplainRequest(f.request, stdin)
	if err != nil {
		return nil, err
	}
	if req != nil {
		if f.preset != "" {
			return nil, errors.New("invalid flag --preset: a request names its own policy (drop --preset, or set policy in the request)")
		}
		if f.persona != "" && f.persona != req.Persona {
			return nil, fmt.Errorf("invalid flag --persona: %q, but the request is for persona %q", f.persona, req.Persona)
		}
		f.persona = req.Persona
	}
	bases, err := f.basePolicies()
	if err != nil {
		return nil, err
	}
	var out []retry.Policy
	for _, name := range slices.Sorted(maps.Keys(bases)) {
		p, err := f.resolve(bases[name], req)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// basePolicies are the personas' own policies, by persona: from the config
// file, or from the built-in persona defaults and PERSONA_TIMEOUTS_JSON.
func (f explainFlags) basePolicies() (map[string]retry.Policy, error) {
	all := map[string]retry.Policy{}
	if f.configPath != "" {
		cfg, err := config.Load(f.configPath, os.LookupEnv)
		if err != nil {
			return nil, err
		}
		personas, err := cfg.Personas(nil)
		if err != nil {
			return nil, err
		}
		for _, p := range personas {
			all[p.Name] = p.Policy
		}
	} else {
		defaults, err := builtinDefaults()
		if err != nil {
			return nil, err
		}
		for name := range defaults.Timeouts {
			all[name] = defaults.Policy(name)
		}
		if f.persona != "" {
			all[f.persona] = defaults.Policy(f.persona)
		}
	}
	if f.persona == "" {
		return all, nil
	}
	p, ok := all[f.persona]
	if !ok {
		return nil, fmt.Errorf("invalid flag --persona: %q is not a persona of %s (personas: %s)",
			f.persona, f.configPath, strings.Join(slices.Sorted(maps.Keys(all)), ", "))
	}
	return map[string]retry.Policy{f.persona: p}, nil
}

// builtinDefaults are the persona defaults with PERSONA_TIMEOUTS_JSON
// applied, as the runtime applies them.
func builtinDefaults() (retry.PersonaDefaults, error) {
	defaults := retry.NewPersonaDefaults()
	v := os.Getenv(retry.PersonaTimeoutsEnv)
	if v == "" {
		return defaults, nil
	}
	over, err := retry.ParsePersonaTimeoutsJSON(v)
	if err != nil {
		return defaults, fmt.Errorf("%s: %w", retry.PersonaTimeoutsEnv, err)
	}
	return defaults.Merge(over), nil
}

// resolve applies --preset, or the request's policy and overrides, to a
// persona's policy.
func (f explainFlags) resolve(base retry.Policy, req *schemas.PersonaRequest) (retry.Policy, error) {
	if req != nil {
		return wire.RequestPolicy(base, req, nil)
	}
	if f.preset == "" {
		return base, nil
	}
	p, err := retry.ForRequest(base, f.preset, retry.Overrides{}, nil)
	if err != nil {
		return retry.Policy{}, fmt.Errorf("invalid flag --preset: %w", err)
	}
	return p, nil
}

// readExplainRequest reads --request: JSON text, @file or - (stdin). Only
// persona, policy and policy_overrides matter, so a partial request will do.
func readExplainRequest(v string, stdin io.Reader) (*schemas.PersonaRequest, error) {
	data, err := readArg("--request", v, stdin)
	if err != nil || data == nil {
		return nil, err
	}
	var req schemas.PersonaRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("invalid flag --request: not a persona request: %w", err)
	}
	if req.Persona == "" {
		return nil, errors.New("invalid flag --request: the request names no persona")
	}
	return &req, nil
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
