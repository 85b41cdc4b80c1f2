package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/personaq/personaq/retry"
)

// EnvPrefix starts every personaq configuration variable.
const EnvPrefix = "PERSONAQ_"

// envVar overrides one scalar field. Its variable is EnvPrefix followed by
// the YAML path upper-cased with dots as underscores (EnvName).
type envVar struct {
	field string
	set   func(f *File, v string) error
}

// envTable lists every global variable. Lists are comma-separated; an empty
// value counts as unset.
var envTable = []envVar{
	{"nats.urls", list(func(f *File) *[]string { return &f.NATS.URLs })},
	{"nats.creds_file", str(func(f *File) *string { return &f.NATS.CredsFile })},
	{"nats.nkey_file", str(func(f *File) *string { return &f.NATS.NkeyFile })},
	{"nats.user", str(func(f *File) *string { return &f.NATS.User })},
	{"nats.password", str(func(f *File) *string { return &f.NATS.Password })},
	{"nats.token", str(func(f *File) *string { return &f.NATS.Token })},
	{"nats.name", str(func(f *File) *string { return &f.NATS.Name })},
	{"nats.tls.enabled", boolean(func(f *File) *bool { return &f.NATS.TLS.Enabled })},
	{"nats.tls.ca_file", str(func(f *File) *string { return &f.NATS.TLS.CAFile })},
	{"nats.tls.cert_file", str(func(f *File) *string { return &f.NATS.TLS.CertFile })},
	{"nats.tls.key_file", str(func(f *File) *string { return &f.NATS.TLS.KeyFile })},
	{"nats.tls.insecure_skip_verify", boolean(func(f *File) *bool { return &f.NATS.TLS.InsecureSkipVerify })},

	{"redis.url", str(func(f *File) *string { return &f.Redis.URL })},
	{"redis.addrs", list(func(f *File) *[]string { return &f.Redis.Addrs })},
	{"redis.sentinel.master_name", str(func(f *File) *string { return &f.Redis.Sentinel.MasterName })},
	{"redis.sentinel.addrs", list(func(f *File) *[]string { return &f.Redis.Sentinel.Addrs })},
	{"redis.username", str(func(f *File) *string { return &f.Redis.Username })},
	{"redis.password", str(func(f *File) *string { return &f.Redis.Password })},
	{"redis.db", integer(func(f *File) *int { return &f.Redis.DB })},
	{"redis.tls.enabled", boolean(func(f *File) *bool { return &f.Redis.TLS.Enabled })},
	{"redis.tls.ca_file", str(func(f *File) *string { return &f.Redis.TLS.CAFile })},
	{"redis.tls.cert_file", str(func(f *File) *string { return &f.Redis.TLS.CertFile })},
	{"redis.tls.key_file", str(func(f *File) *string { return &f.Redis.TLS.KeyFile })},
	{"redis.tls.insecure_skip_verify", boolean(func(f *File) *bool { return &f.Redis.TLS.InsecureSkipVerify })},
	{"redis.ttl", duration(func(f *File) *Duration { return &f.Redis.TTL })},
	{"redis.prefix", str(func(f *File) *string { return &f.Redis.Prefix })},

	{"topology.requests_stream", str(func(f *File) *string { return &f.TopologyConfig.RequestsStream })},
	{"topology.requests_prefix", str(func(f *File) *string { return &f.TopologyConfig.RequestsPrefix })},
	{"topology.quarantine_stream", str(func(f *File) *string { return &f.TopologyConfig.QuarantineStream })},
	{"topology.quarantine_prefix", str(func(f *File) *string { return &f.TopologyConfig.QuarantinePrefix })},
	{"topology.outcomes_stream", str(func(f *File) *string { return &f.TopologyConfig.OutcomesStream })},
	{"topology.outcomes_prefix", str(func(f *File) *string { return &f.TopologyConfig.OutcomesPrefix })},
	{"topology.replicas", integer(func(f *File) *int { return &f.TopologyConfig.Replicas })},
	{"topology.storage", str(func(f *File) *string { return &f.TopologyConfig.Storage })},
	{"topology.duplicate_window", duration(func(f *File) *Duration { return &f.TopologyConfig.DuplicateWindow })},
	{"topology.outcomes_max_age", duration(func(f *File) *Duration { return &f.TopologyConfig.OutcomesMaxAge })},
	{"topology.outputs_bucket", str(func(f *File) *string { return &f.TopologyConfig.OutputsBucket })},
	{"topology.inline_output_max", integer(func(f *File) *int { return &f.TopologyConfig.InlineOutputMax })},
	{"topology.attempts_stream", str(func(f *File) *string { return &f.TopologyConfig.AttemptsStream })},
	{"topology.attempts_prefix", str(func(f *File) *string { return &f.TopologyConfig.AttemptsPrefix })},
	{"topology.attempts_max_age", duration(func(f *File) *Duration { return &f.TopologyConfig.AttemptsMaxAge })},
	{"topology.attempts_max_bytes", integer(func(f *File) *int { return &f.TopologyConfig.AttemptsMaxBytes })},
	{"topology.output_stream", str(func(f *File) *string { return &f.TopologyConfig.OutputStream })},
	{"topology.output_prefix", str(func(f *File) *string { return &f.TopologyConfig.OutputPrefix })},
	{"topology.output_max_age", duration(func(f *File) *Duration { return &f.TopologyConfig.OutputMaxAge })},
	{"topology.output_max_bytes", integer(func(f *File) *int { return &f.TopologyConfig.OutputMaxBytes })},
	{"topology.output_attempt_max", integer(func(f *File) *int { return &f.TopologyConfig.OutputAttemptMax })},

	{"runtime.drain_timeout", duration(func(f *File) *Duration { return &f.Runtime.DrainTimeout })},
	{"runtime.fetch_max_wait", duration(func(f *File) *Duration { return &f.Runtime.FetchMaxWait })},
	{"runtime.unknown_persona_grace", duration(func(f *File) *Duration { return &f.Runtime.UnknownPersonaGrace })},
	{"runtime.attempt_events", func(f *File, v string) error {
		var b bool
		if err := setBool(&b, v); err != nil {
			return err
		}
		f.Runtime.AttemptEvents = &b
		return nil
	}},

	{"api.listen", str(func(f *File) *string { return &f.API.Listen })},
	{"api.tls_cert", str(func(f *File) *string { return &f.API.TLSCert })},
	{"api.tls_key", str(func(f *File) *string { return &f.API.TLSKey })},
	{"api.index_size", integer(func(f *File) *int { return &f.API.IndexSize })},

	{"defaults.policy", str(func(f *File) *string { return &f.Defaults.Policy })},
	{"defaults.concurrency", integer(func(f *File) *int { return &f.Defaults.Concurrency })},
	{"defaults.max_replicas", integer(func(f *File) *int { return &f.Defaults.MaxReplicas })},
	{"defaults.timeout", duration(func(f *File) *Duration { return &f.Defaults.Timeout })},
	{"defaults.coding_timeout", duration(func(f *File) *Duration { return &f.Defaults.CodingTimeout })},
	{"defaults.max_retries", func(f *File, v string) error {
		var n int
		if err := setInt(&n, v); err != nil {
			return err
		}
		f.Defaults.MaxRetries = &n
		return nil
	}},
	{"defaults.circuit.failures", integer(func(f *File) *int { return &f.Defaults.Circuit.Failures })},
	{"defaults.circuit.cool_down", duration(func(f *File) *Duration { return &f.Defaults.Circuit.CoolDown })},
}

// personaEnvVar overrides one field of every persona named in the file:
// PERSONAQ_PERSONAS_<NAME>_<KEY>, NAME being the persona name upper-cased
// with '-' as '_' (PersonaEnvName).
type personaEnvVar struct {
	key string
	set func(p *PersonaConfig, v string) error
}

var personaEnvTable = []personaEnvVar{
	// Like every other variable, this one wins over the file (see "Persona
	// timeouts" in the package documentation).
	{"timeout", func(p *PersonaConfig, v string) error { return setDuration(&p.Timeout, v) }},
	{"policy", func(p *PersonaConfig, v string) error { p.Policy.Preset = v; return nil }},
	{"concurrency", func(p *PersonaConfig, v string) error { return setInt(&p.Concurrency, v) }},
	{"max_replicas", func(p *PersonaConfig, v string) error { return setInt(&p.MaxReplicas, v) }},
	{"ack_wait", func(p *PersonaConfig, v string) error { return setDuration(&p.AckWait, v) }},
	{"max_deliver", func(p *PersonaConfig, v string) error { return setInt(&p.MaxDeliver, v) }},
	{"coding", func(p *PersonaConfig, v string) error { return setBool(&p.Coding, v) }},
	{"rate_limit.limiter", func(p *PersonaConfig, v string) error { p.RateLimit.Limiter = v; return nil }},
	{"circuit.failures", func(p *PersonaConfig, v string) error { return setInt(&p.Circuit.Failures, v) }},
	{"circuit.cool_down", func(p *PersonaConfig, v string) error { return setDuration(&p.Circuit.CoolDown, v) }},
	{"circuit.disabled", func(p *PersonaConfig, v string) error { return setBool(&p.Circuit.Disabled, v) }},
	{"invoker.url", func(p *PersonaConfig, v string) error { p.Invoker.URL = v; return nil }},
	{"invoker.path", func(p *PersonaConfig, v string) error { p.Invoker.Path = v; return nil }},
	{"invoker.max_response_bytes", func(p *PersonaConfig, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer, got %q", v)
		}
		p.Invoker.MaxResponseBytes = n
		return nil
	}},
}

// EnvName is the variable that overrides the field at a YAML path:
// "redis.password" → PERSONAQ_REDIS_PASSWORD.
func EnvName(field string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(field, ".", "_"))
}

// PersonaEnvName is the variable that overrides key (e.g. "timeout",
// "invoker.url") of persona: ("tester-qa", "timeout") →
// PERSONAQ_PERSONAS_TESTER_QA_TIMEOUT.
func PersonaEnvName(persona, key string) string {
	return EnvName("personas." + strings.ReplaceAll(persona, "-", "_") + "." + key)
}

// EnvNames lists every variable Load reads, with <NAME> standing for a
// persona name, in the order Load applies them.
func EnvNames() []string {
	names := make([]string, 0, len(envTable)+len(personaEnvTable)+1)
	for _, e := range envTable {
		names = append(names, EnvName(e.field))
	}
	for _, e := range personaEnvTable {
		names = append(names, EnvName("personas.<NAME>."+e.key))
	}
	return append(names, retry.PersonaTimeoutsEnv)
}

// applyEnv applies the variables in env and returns PERSONA_TIMEOUTS_JSON's
// timeouts. Bad values are problems naming the field and the variable.
func (f *File) applyEnv(env func(string) (string, bool), probs *problems) map[string]time.Duration {
	for _, e := range envTable {
		name := EnvName(e.field)
		if v, ok := env(name); ok && v != "" {
			if err := e.set(f, v); err != nil {
				probs.add(e.field, "%s: %v", name, err)
			}
		}
	}
	for _, persona := range slices.Sorted(maps.Keys(f.PersonaConfigs)) {
		p := f.PersonaConfigs[persona]
		if p.Timeout != 0 {
			p.timeoutSource = timeoutFromYAML
		}
		for _, e := range personaEnvTable {
			name := PersonaEnvName(persona, e.key)
			if v, ok := env(name); ok && v != "" {
				err := e.set(p, v)
				switch {
				case err != nil:
					probs.add(join("personas."+persona, e.key), "%s: %v", name, err)
				case e.key == "timeout":
					p.timeoutSource = name
				}
			}
		}
	}
	raw, _ := env(retry.PersonaTimeoutsEnv)
	timeouts, err := retry.ParsePersonaTimeoutsJSON(raw)
	if err != nil {
		probs.addErr("", err, nil)
	}
	return timeouts
}

// Setters: each parses one variable's value into a field.

func str(field func(*File) *string) func(*File, string) error {
	return func(f *File, v string) error { *field(f) = v; return nil }
}

func list(field func(*File) *[]string) func(*File, string) error {
	return func(f *File, v string) error { *field(f) = splitList(v); return nil }
}

func integer(field func(*File) *int) func(*File, string) error {
	return func(f *File, v string) error { return setInt(field(f), v) }
}

func boolean(field func(*File) *bool) func(*File, string) error {
	return func(f *File, v string) error { return setBool(field(f), v) }
}

func duration(field func(*File) *Duration) func(*File, string) error {
	return func(f *File, v string) error { return setDuration(field(f), v) }
}

func setInt(dst *int, v string) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("want an integer, got %q", v)
	}
	*dst = n
	return nil
}

func setBool(dst *bool, v string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("want true or false, got %q", v)
	}
	*dst = b
	return nil
}

func setDuration(dst *Duration, v string) error {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a number with a unit, such as \"90s\" or \"10m\"", v)
	}
	*dst = Duration(d)
	return nil
}

// splitList splits a comma-separated value, dropping blanks.
func splitList(v string) []string {
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
