package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.yaml.in/yaml/v3"
)

// Defaults Load applies that belong to the binary. Every other default is
// the library's, defined once where it is used and referred to here (see
// applyDefaults): topology names and bounds from wire.Topology.WithDefaults,
// the runtime's and subscriber's from consumers and transport, the ledger
// TTL from ledger, circuits from flow, persona timeouts and the default
// preset from retry (the step budget's).
const (
	DefaultNATSURL  = nats.DefaultURL
	DefaultNATSName = "personaq"
)

// Invoker types.
const (
	InvokerHTTP    = "http"
	InvokerCommand = "command"
	InvokerDemo    = "demo"
)

// File is personaq's configuration file. Load decodes it strictly, applies
// environment overrides and defaults, and validates it; after Load every
// defaulted field holds its effective value.
//
// Two sections are reached through fields whose Go names differ from their
// YAML keys, because methods of the same name build runtime values from
// them: TopologyConfig (topology:, see Topology) and PersonaConfigs
// (personas:, see Personas).
type File struct {
	NATS           NATSConfig                `yaml:"nats"`
	Redis          RedisConfig               `yaml:"redis"`
	TopologyConfig TopologyConfig            `yaml:"topology"`
	Runtime        RuntimeConfig             `yaml:"runtime"`
	Defaults       DefaultsConfig            `yaml:"defaults"`
	PersonaConfigs map[string]*PersonaConfig `yaml:"personas"`
	// Limiters are shared rate limits personas name in rate_limit.limiter.
	Limiters map[string]LimiterConfig `yaml:"limiters,omitempty"`
	// API configures `personaq api`, the HTTP API server.
	API APIConfig `yaml:"api,omitempty"`
}

// NATSConfig is how to reach NATS. At most one of CredsFile and NkeyFile;
// Token and User exclude each other.
type NATSConfig struct {
	// URLs of the cluster's servers. Default: [nats://127.0.0.1:4222].
	URLs []string `yaml:"urls"`
	// CredsFile is a user JWT + nkey seed file (decentralised auth).
	CredsFile string `yaml:"creds_file,omitempty"`
	// NkeyFile holds a user nkey seed.
	NkeyFile string `yaml:"nkey_file,omitempty"`
	// User and Password authenticate with a username and password.
	User     string `yaml:"user,omitempty"`
	Password string `yaml:"password,omitempty"`
	// Token authenticates with a token.
	Token string `yaml:"token,omitempty"`
	// TLS for the connection (tls:// URLs turn it on too).
	TLS TLSConfig `yaml:"tls,omitempty"`
	// Name is the connection name servers show. Default: "personaq".
	Name string `yaml:"name"`
}

// URL returns the server URLs as the comma-separated list nats.Connect
// takes.
func (c NATSConfig) URL() string { return strings.Join(c.URLs, ",") }

// TLSConfig is a client TLS setup. Any field set turns TLS on.
type TLSConfig struct {
	// Enabled turns TLS on with the system's root CAs when no other field
	// is set. Default: false.
	Enabled bool `yaml:"enabled,omitempty"`
	// CAFile is a PEM bundle of root CAs to trust instead of the system's.
	CAFile string `yaml:"ca_file,omitempty"`
	// CertFile and KeyFile are a PEM client certificate and key (mutual
	// TLS); both or neither.
	CertFile string `yaml:"cert_file,omitempty"`
	KeyFile  string `yaml:"key_file,omitempty"`
	// InsecureSkipVerify skips server certificate checks. Testing only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify,omitempty"`
}

// On reports whether TLS is requested.
func (t TLSConfig) On() bool { return t != TLSConfig{} }

// RedisConfig is how to reach the Redis attempt ledger. Exactly one of URL
// (one server), Addrs (Redis Cluster) and Sentinel, or none: without Redis
// the ledger is off and attempts are counted by deliveries.
type RedisConfig struct {
	// URL of one server: redis://[user:password@]host:port[/db] or rediss://.
	URL string `yaml:"url,omitempty"`
	// Addrs of Redis Cluster nodes (host:port).
	Addrs []string `yaml:"addrs,omitempty"`
	// Sentinel finds the master through Redis Sentinel.
	Sentinel SentinelConfig `yaml:"sentinel,omitempty"`
	// Username and Password authenticate (ACL); they win over the URL's.
	Username string `yaml:"username,omitempty"`
	Password string `yaml:"password,omitempty"`
	// DB selects the database (not on Cluster); wins over the URL's when
	// not 0. Default: 0.
	DB int `yaml:"db,omitempty"`
	// TLS for the connection (rediss:// URLs turn it on too).
	TLS TLSConfig `yaml:"tls,omitempty"`
	// TTL of a task's ledger entry after its last update. Default: 168h.
	TTL Duration `yaml:"ttl"`
	// Prefix of the ledger's keys. Default: empty, the ledger's own.
	Prefix string `yaml:"prefix,omitempty"`
}

// Enabled reports whether a Redis server is configured.
func (c RedisConfig) Enabled() bool {
	return c.URL != "" || len(c.Addrs) > 0 || c.Sentinel.MasterName != "" || len(c.Sentinel.Addrs) > 0
}

// SentinelConfig names the master and the sentinels that know it.
type SentinelConfig struct {
	MasterName string   `yaml:"master_name,omitempty"`
	Addrs      []string `yaml:"addrs,omitempty"`
}

// TopologyConfig names streams and subjects (see wire.Topology; every
// default comes from there).
type TopologyConfig struct {
	// Default: PERSONAQ_REQUESTS, subjects personaq.requests.<persona>.
	RequestsStream string `yaml:"requests_stream"`
	RequestsPrefix string `yaml:"requests_prefix"`
	// Default: PERSONAQ_QUARANTINE, subjects personaq.quarantine.….
	QuarantineStream string `yaml:"quarantine_stream"`
	QuarantinePrefix string `yaml:"quarantine_prefix"`
	// Default: PERSONAQ_OUTCOMES, subjects personaq.outcomes.….
	OutcomesStream string `yaml:"outcomes_stream"`
	OutcomesPrefix string `yaml:"outcomes_prefix"`
	// Replicas of every stream: 1, or 3 (or 5) on a cluster. Default: 1.
	Replicas int `yaml:"replicas"`
	// Storage of every stream: file or memory. Default: file.
	Storage string `yaml:"storage"`
	// DuplicateWindow is the Nats-Msg-Id dedup window. Default: 2m.
	DuplicateWindow Duration `yaml:"duplicate_window"`
	// OutcomesMaxAge is how long terminal records (and the outputs they
	// reference) are kept. Default: 168h.
	OutcomesMaxAge Duration `yaml:"outcomes_max_age"`
	// OutputsBucket is the object store for outputs larger than
	// InlineOutputMax. Default: PERSONAQ_OUTPUTS.
	OutputsBucket string `yaml:"outputs_bucket"`
	// InlineOutputMax is the largest output kept inside the terminal record,
	// in bytes (at most 262144). Default: 65536.
	InlineOutputMax int `yaml:"inline_output_max"`
	// Default: PERSONAQ_ATTEMPTS, subjects personaq.attempts.<request>.<kind>.
	AttemptsStream string `yaml:"attempts_stream"`
	AttemptsPrefix string `yaml:"attempts_prefix"`
	// AttemptsMaxAge is how long attempt events are kept. Default: 24h.
	AttemptsMaxAge Duration `yaml:"attempts_max_age"`
	// AttemptsMaxBytes bounds the attempt events' memory; past it the
	// oldest go first. Default: 268435456 (256 MiB).
	AttemptsMaxBytes int `yaml:"attempts_max_bytes"`
	// Live output: what personas write while they work, streamed to
	// callers. Default: PERSONAQ_OUTPUT, subjects
	// personaq.output.<request>.<attempt>, in memory.
	OutputStream string `yaml:"output_stream"`
	OutputPrefix string `yaml:"output_prefix"`
	// OutputMaxAge is how long live output chunks are kept. Default: 1h.
	OutputMaxAge Duration `yaml:"output_max_age"`
	// OutputMaxBytes bounds the live output stream's memory; past it the
	// oldest chunks go first. Default: 268435456 (256 MiB).
	OutputMaxBytes int `yaml:"output_max_bytes"`
	// OutputAttemptMax caps the live output of one attempt, in bytes; past
	// it the rest is dropped and counted, the persona never blocked.
	// Default: 1048576 (1 MiB).
	OutputAttemptMax int `yaml:"output_attempt_max"`
}

// RuntimeConfig tunes the consumer runtime.
type RuntimeConfig struct {
	// DrainTimeout bounds graceful shutdown of in-flight work. Default: 30s.
	DrainTimeout Duration `yaml:"drain_timeout"`
	// FetchMaxWait bounds one pull request. Default: 1s.
	FetchMaxWait Duration `yaml:"fetch_max_wait"`
	// UnknownPersonaGrace is how long a request for a persona no replica
	// serves waits before it is quarantined as unknown_persona. Default: 5m.
	UnknownPersonaGrace Duration `yaml:"unknown_persona_grace"`
	// AttemptEvents publishes each attempt's start and failure for callers
	// following a request. They cost throughput on a busy replica (see
	// BENCHMARKS.md); terminal records are kept either way. Default: true.
	AttemptEvents *bool `yaml:"attempt_events"`
}

// DefaultsConfig holds what personas inherit when they say nothing.
type DefaultsConfig struct {
	// Policy is the preset personas use. Default: "persona" (the persona
	// request step).
	Policy string `yaml:"policy"`
	// Concurrency per persona per replica. Default: 16.
	Concurrency int `yaml:"concurrency"`
	// MaxReplicas sizes each persona's MaxAckPending. Default: 4.
	MaxReplicas int `yaml:"max_replicas"`
	// Timeout of an attempt of a persona with no timeout of its own (the
	// persona timeouts' default). Default: 10m.
	Timeout Duration `yaml:"timeout"`
	// CodingTimeout is the same for coding personas
	// (personaCodingTimeoutMs). Default: 3m.
	CodingTimeout Duration `yaml:"coding_timeout"`
	// MaxRetries are the retries after the first attempt of every persona
	// under the persona preset whose policy sets no max_attempts (the step
	// budget's personaTimeoutMaxRetries); 0 means one attempt and no retry.
	// Other presets keep their own attempt counts. Default: 3.
	MaxRetries *int `yaml:"max_retries"`
	// Circuit is every persona's circuit breaker unless it sets its own.
	// Default: 5 failures, 30s cool-down.
	Circuit CircuitConfig `yaml:"circuit"`
}

// PersonaConfig is one persona.
type PersonaConfig struct {
	// Invoker runs the persona's attempts. Required.
	Invoker InvokerConfig `yaml:"invoker"`
	// Timeout of one attempt. After Load it holds the effective timeout;
	// TimeoutSource says where it came from. The precedence (environment
	// over file) is in the package documentation, "Persona timeouts".
	Timeout Duration `yaml:"timeout"`
	// Policy is a preset name, or an inline policy on top of a preset.
	// Default: defaults.policy.
	Policy PolicyConfig `yaml:"policy"`
	// Concurrency: messages this replica runs at once. Default:
	// defaults.concurrency.
	Concurrency int `yaml:"concurrency"`
	// MaxReplicas sizes MaxAckPending. Default: defaults.max_replicas.
	MaxReplicas int `yaml:"max_replicas"`
	// AckWait of the durable consumer. Default: 0, the runtime's (the
	// longest attempt timeout plus 5s).
	AckWait Duration `yaml:"ack_wait,omitempty"`
	// MaxDeliver is the crash-loop safety net; at least the policy's
	// max_attempts. Default: 0, the runtime's (50).
	MaxDeliver int `yaml:"max_deliver,omitempty"`
	// Coding marks a coding persona (defaults.coding_timeout applies).
	Coding bool `yaml:"coding,omitempty"`
	// RateLimit names the shared limiter this persona's requests take
	// permits from. Default: none.
	RateLimit RateLimitConfig `yaml:"rate_limit,omitempty"`
	// Circuit is the persona's circuit breaker. Default: defaults.circuit.
	Circuit CircuitConfig `yaml:"circuit"`

	timeoutSource string
	// defaultMaxRetries is defaults.max_retries once Load applied it.
	defaultMaxRetries *int
}

// TimeoutSource says where Timeout came from after Load: "yaml", the
// environment variable's name, PERSONA_TIMEOUTS_JSON, "built-in",
// "defaults.coding_timeout" or "defaults.timeout".
func (p *PersonaConfig) TimeoutSource() string { return p.timeoutSource }

// InvokerConfig says how a persona is run. Fields belong to one type each;
// setting another type's field is an error.
type InvokerConfig struct {
	// Type is http, command or demo. Required.
	Type string `yaml:"type"`

	// http: URL each attempt is POSTed to. Required.
	URL string `yaml:"url,omitempty"`
	// http: headers set on every request. Values are treated as secrets.
	Headers map[string]string `yaml:"headers,omitempty"`
	// http: a 422 with a body is a validation failure fed back to the next
	// attempt. Default: false (terminal).
	ValidationOn422 bool `yaml:"validation_on_422,omitempty"`

	// http and command: the most bytes of answer (HTTP body, command
	// stdout) kept, on failed attempts too; a successful answer over it
	// fails as terminal. Default: 1048576 (1 MiB); answers of 8 MiB need
	// 8388608.
	MaxResponseBytes int64 `yaml:"max_response_bytes,omitempty"`

	// command: the program; a name without a slash is looked up in PATH, a
	// relative path is relative to Dir (or personaq's working directory).
	// Required.
	Path string `yaml:"path,omitempty"`
	// command: arguments after the program name.
	Args []string `yaml:"args,omitempty"`
	// command: environment added to personaq's. Values are treated as
	// secrets.
	Env map[string]string `yaml:"env,omitempty"`
	// command: working directory. Default: personaq's.
	Dir string `yaml:"dir,omitempty"`
	// command: exit code → class (succeeded, retryable, timeout, network,
	// validation, terminal), on top of 0 succeeded, 65 validation, 69
	// network, 75, 137 and 143 retryable; any other code is terminal.
	ExitCodes map[string]string `yaml:"exit_codes,omitempty"`
	// command: bytes of stderr kept as the error text. Default: 4096.
	StderrTail int `yaml:"stderr_tail,omitempty"`
	// command: time between SIGTERM and SIGKILL at the timeout. Default: 2s.
	KillGrace Duration `yaml:"kill_grace,omitempty"`

	// demo: the built-in demo persona (handlers.DemoPersonas). Required.
	Demo string `yaml:"demo,omitempty"`
}

// Duration is a time.Duration written as a Go duration string: "90s",
// "10m", "1h30m". A bare number is an error (no unit). The zero value
// means "use the default" wherever a default exists.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String is time.Duration's, without zero minutes and seconds at the end:
// "168h", "10m", "1h30m".
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// UnmarshalYAML implements yaml.Unmarshaler. Errors are reported with
// their line; Load names the field from it.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return lineErr(n, "want a duration such as \"90s\" or \"10m\"")
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return lineErr(n, "invalid duration %q: want a number with a unit, such as \"90s\" or \"10m\"", n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// lineErr is an unmarshalling error the yaml decoder collects (it goes on
// with the rest of the document) rather than stopping at.
func lineErr(n *yaml.Node, format string, args ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, fmt.Sprintf(format, args...))}}
}
