package config

import (
	"maps"
	"slices"
	"time"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/flow"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/retry"
)

// applyDefaults fills every unset field with its default; it runs after the
// environment so defaults inherit overridden values (a persona's
// concurrency defaults to PERSONAQ_DEFAULTS_CONCURRENCY when set).
// Negative values are left for validate to report.
func (f *File) applyDefaults(timeoutsJSON map[string]time.Duration) {
	if len(f.NATS.URLs) == 0 {
		f.NATS.URLs = []string{DefaultNATSURL}
	}
	orStr(&f.NATS.Name, DefaultNATSName)
	orStr(&f.API.Listen, DefaultAPIListen)
	orDur(&f.Redis.TTL, ledger.DefaultTTL)

	t, def := &f.TopologyConfig, wire.Topology{}.WithDefaults()
	orStr(&t.RequestsStream, def.RequestsStream)
	orStr(&t.RequestsPrefix, def.RequestsPrefix)
	orStr(&t.QuarantineStream, def.QuarantineStream)
	orStr(&t.QuarantinePrefix, def.QuarantinePrefix)
	orStr(&t.OutcomesStream, def.OutcomesStream)
	orStr(&t.OutcomesPrefix, def.OutcomesPrefix)
	orInt(&t.Replicas, def.Replicas)
	orStr(&t.Storage, storageFile)
	orDur(&t.DuplicateWindow, def.DuplicateWindow)
	orDur(&t.OutcomesMaxAge, def.OutcomesMaxAge)
	orStr(&t.OutputsBucket, def.OutputsBucket)
	orInt(&t.InlineOutputMax, def.InlineOutputMax)
	orStr(&t.AttemptsStream, def.AttemptsStream)
	orStr(&t.AttemptsPrefix, def.AttemptsPrefix)
	orDur(&t.AttemptsMaxAge, def.AttemptsMaxAge)
	orInt(&t.AttemptsMaxBytes, int(def.AttemptsMaxBytes))
	orStr(&t.OutputStream, def.Output.Stream)
	orStr(&t.OutputPrefix, def.Output.Prefix)
	orDur(&t.OutputMaxAge, def.Output.MaxAge)
	orInt(&t.OutputMaxBytes, int(def.Output.MaxBytes))
	orInt(&t.OutputAttemptMax, int(def.Output.AttemptMax))

	orDur(&f.Runtime.DrainTimeout, consumers.DefaultDrainTimeout)
	orDur(&f.Runtime.FetchMaxWait, consumers.DefaultFetchMaxWait)
	orDur(&f.Runtime.UnknownPersonaGrace, consumers.DefaultUnknownPersonaGrace)
	if f.Runtime.AttemptEvents == nil {
		on := true
		f.Runtime.AttemptEvents = &on
	}

	d := &f.Defaults
	orStr(&d.Policy, retry.PresetPersona)
	orInt(&d.Concurrency, consumers.DefaultConcurrency)
	orInt(&d.MaxReplicas, consumers.DefaultMaxReplicas)
	orDur(&d.Timeout, retry.DefaultPersonaTimeout)
	orDur(&d.CodingTimeout, retry.DefaultCodingTimeout)
	orInt(&d.Circuit.Failures, flow.DefaultCircuitFailures)
	orDur(&d.Circuit.CoolDown, flow.DefaultCircuitCoolDown)
	if d.MaxRetries == nil {
		n := retry.DefaultMaxRetries
		d.MaxRetries = &n
	}

	f.applyPersonaDefaults(timeoutsJSON)
}

// applyPersonaDefaults resolves each persona's timeout (a YAML or
// PERSONAQ_PERSONAS_<NAME>_TIMEOUT value is already in place, its source
// noted): the persona's variable > PERSONA_TIMEOUTS_JSON > YAML > built-in
// per persona > coding timeout > default timeout (retry.PersonaDefaults).
func (f *File) applyPersonaDefaults(timeoutsJSON map[string]time.Duration) {
	pd := retry.NewPersonaDefaults()
	pd.DefaultTimeout = f.Defaults.Timeout.Std()
	pd.CodingTimeout = f.Defaults.CodingTimeout.Std()
	builtin := pd.Timeouts
	for _, name := range slices.Sorted(maps.Keys(f.PersonaConfigs)) {
		if f.PersonaConfigs[name].Coding {
			pd.Coding = append(pd.Coding, name)
		}
	}
	pd = pd.Merge(timeoutsJSON)
	for name, p := range f.PersonaConfigs {
		orStr(&p.Policy.Preset, f.Defaults.Policy)
		orInt(&p.Concurrency, f.Defaults.Concurrency)
		orInt(&p.MaxReplicas, f.Defaults.MaxReplicas)
		p.defaultMaxRetries = f.Defaults.MaxRetries
		p.Circuit.applyDefaults(f.Defaults.Circuit)
		p.Circuit.Disabled = p.Circuit.Disabled || f.Defaults.Circuit.Disabled
		switch {
		case p.timeoutSource != "" && p.timeoutSource != timeoutFromYAML:
			continue // the persona's own variable
		case timeoutsJSON[name] > 0:
			p.Timeout, p.timeoutSource = Duration(timeoutsJSON[name]), retry.PersonaTimeoutsEnv
			continue
		case p.Timeout != 0:
			continue
		}
		p.Timeout = Duration(pd.Timeout(name))
		switch {
		case builtin[name] > 0:
			p.timeoutSource = "built-in"
		case p.Coding:
			p.timeoutSource = "defaults.coding_timeout"
		default:
			p.timeoutSource = "defaults.timeout"
		}
	}
}

// timeoutFromYAML is TimeoutSource for a timeout written in the file.
const timeoutFromYAML = "yaml"

func orStr(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

func orInt(n *int, def int) {
	if *n == 0 {
		*n = def
	}
}

func orDur(d *Duration, def time.Duration) {
	if *d == 0 {
		*d = Duration(def)
	}
}
