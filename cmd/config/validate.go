package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
)

const (
	storageFile   = "file"
	storageMemory = "memory"
)

var (
	// personaNameRe: persona names become NATS subject tokens and consumer
	// names.
	personaNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	// streamNameRe is stricter than JetStream (no '.', '*', '>', spaces or
	// path separators), which keeps names portable.
	streamNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	// subjectTokenRe: one token of a subject prefix, no wildcards.
	subjectTokenRe = regexp.MustCompile(`^[^.*>\s]+$`)
)

// Validate reports every problem of a loaded File (Load calls it), joined,
// each a *FieldError wrapping ErrInvalid.
func (f *File) Validate() error {
	var probs problems
	f.validate(&probs)
	return probs.err()
}

func (f *File) validate(probs *problems) {
	f.NATS.validate(probs)
	f.Redis.validate(probs)
	f.TopologyConfig.validate(probs)
	nonNegative(probs, "runtime.drain_timeout", f.Runtime.DrainTimeout)
	nonNegative(probs, "runtime.fetch_max_wait", f.Runtime.FetchMaxWait)
	nonNegative(probs, "runtime.unknown_persona_grace", f.Runtime.UnknownPersonaGrace)
	f.Defaults.validate(probs)
	f.validatePersonas(probs)
	f.validateFlow(probs)
	f.API.validate(probs)
}

func (c NATSConfig) validate(probs *problems) {
	for i, raw := range c.URLs {
		field := fmt.Sprintf("nats.urls[%d]", i)
		check := raw
		if !strings.Contains(raw, "://") {
			check = "nats://" + raw // nats.Connect takes host:port too
		}
		u, err := url.Parse(check)
		switch {
		case err != nil:
			probs.add(field, "not a URL: %s", RedactURL(raw))
		case !slices.Contains([]string{"nats", "tls", "ws", "wss"}, u.Scheme):
			probs.add(field, "scheme must be nats, tls, ws or wss, got %q", u.Scheme)
		case u.Hostname() == "":
			probs.add(field, "host required in %s", RedactURL(raw))
		case !handlers.ValidPort(u.Port()):
			probs.add(field, "port must be 1 to 65535, got %s", u.Port())
		}
	}
	if c.CredsFile != "" && c.NkeyFile != "" {
		probs.add("nats.nkey_file", "set creds_file or nkey_file, not both")
	}
	if c.Token != "" && c.User != "" {
		probs.add("nats.token", "set token or user/password, not both")
	}
	if c.Password != "" && c.User == "" {
		probs.add("nats.password", "requires nats.user")
	}
	c.TLS.validate("nats.tls", probs)
}

func (t TLSConfig) validate(path string, probs *problems) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		probs.add(join(path, "cert_file"), "cert_file and key_file go together (mutual TLS)")
	}
}

func (c RedisConfig) validate(probs *problems) {
	modes := []string{}
	if c.URL != "" {
		modes = append(modes, "url")
	}
	if len(c.Addrs) > 0 {
		modes = append(modes, "addrs")
	}
	if c.Sentinel.MasterName != "" || len(c.Sentinel.Addrs) > 0 {
		modes = append(modes, "sentinel")
	}
	if len(modes) > 1 {
		probs.add("redis."+modes[1], "set one of url (one server), addrs (Cluster) and sentinel, not %s", strings.Join(modes, " and "))
	}
	if c.URL != "" {
		validateRedisURL(c.URL, probs)
	}
	validateAddrs("redis.addrs", c.Addrs, probs)
	validateAddrs("redis.sentinel.addrs", c.Sentinel.Addrs, probs)
	if c.Sentinel.MasterName != "" && len(c.Sentinel.Addrs) == 0 {
		probs.add("redis.sentinel.addrs", "required with sentinel.master_name")
	}
	if c.Sentinel.MasterName == "" && len(c.Sentinel.Addrs) > 0 {
		probs.add("redis.sentinel.master_name", "required with sentinel.addrs")
	}
	switch {
	case c.DB < 0:
		probs.add("redis.db", "must not be negative, got %d", c.DB)
	case c.DB != 0 && len(c.Addrs) > 0:
		probs.add("redis.db", "Redis Cluster has only database 0, got %d", c.DB)
	}
	nonNegative(probs, "redis.ttl", c.TTL)
	c.TLS.validate("redis.tls", probs)
	if !c.Enabled() {
		for _, s := range []struct {
			field string
			set   bool
		}{{"redis.username", c.Username != ""}, {"redis.password", c.Password != ""}, {"redis.tls", c.TLS.On()}} {
			if s.set {
				probs.add(s.field, "set, but no Redis server is (set url, addrs or sentinel)")
			}
		}
	}
}

func validateRedisURL(raw string, probs *problems) {
	u, err := url.Parse(raw)
	if err != nil {
		probs.add("redis.url", "not a URL: %s", RedactURL(raw))
		return
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		probs.add("redis.url", "scheme must be redis or rediss, got %q", u.Scheme)
		return
	}
	if _, err := redis.ParseURL(raw); err != nil {
		// go-redis's messages name the bad part, not the password; should
		// one ever quote the whole URL, it is shown redacted.
		probs.add("redis.url", "%s", strings.ReplaceAll(err.Error(), raw, RedactURL(raw)))
	}
}

func validateAddrs(field string, addrs []string, probs *problems) {
	for i, a := range addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			probs.add(fmt.Sprintf("%s[%d]", field, i), "want host:port, got %q", a)
		}
	}
}

func (t TopologyConfig) validate(probs *problems) {
	streams := []struct{ field, name string }{
		{"topology.requests_stream", t.RequestsStream},
		{"topology.quarantine_stream", t.QuarantineStream},
		{"topology.outcomes_stream", t.OutcomesStream},
		{"topology.output_stream", t.OutputStream},
	}
	for i, s := range streams {
		if !streamNameRe.MatchString(s.name) {
			probs.add(s.field, "stream names use letters, digits, '-' and '_', got %q", s.name)
		}
		for _, earlier := range streams[:i] {
			if s.name == earlier.name {
				probs.add(s.field, "%q is also %s", s.name, earlier.field)
			}
		}
	}
	prefixes := []struct{ field, prefix string }{
		{"topology.requests_prefix", t.RequestsPrefix},
		{"topology.quarantine_prefix", t.QuarantinePrefix},
		{"topology.outcomes_prefix", t.OutcomesPrefix},
		{"topology.output_prefix", t.OutputPrefix},
	}
	for _, p := range prefixes {
		for tok := range strings.SplitSeq(p.prefix, ".") {
			if !subjectTokenRe.MatchString(tok) {
				probs.add(p.field, "want a subject without wildcards or empty tokens, got %q", p.prefix)
				break
			}
		}
	}
	if t.Replicas != 1 && t.Replicas != 3 && t.Replicas != 5 {
		probs.add("topology.replicas", "must be 1, 3 or 5, got %d", t.Replicas)
	}
	if t.Storage != storageFile && t.Storage != storageMemory {
		probs.add("topology.storage", "must be file or memory, got %q", t.Storage)
	}
	nonNegative(probs, "topology.duplicate_window", t.DuplicateWindow)
	nonNegative(probs, "topology.outcomes_max_age", t.OutcomesMaxAge)
	nonNegative(probs, "topology.attempts_max_age", t.AttemptsMaxAge)
	nonNegative(probs, "topology.attempts_max_bytes", t.AttemptsMaxBytes)
	nonNegative(probs, "topology.output_max_age", t.OutputMaxAge)
	nonNegative(probs, "topology.output_max_bytes", t.OutputMaxBytes)
	nonNegative(probs, "topology.output_attempt_max", t.OutputAttemptMax)
	if t.InlineOutputMax < 0 || t.InlineOutputMax > 256<<10 {
		probs.add("topology.inline_output_max", "must be between 0 and 262144 bytes, got %d", t.InlineOutputMax)
	}
}

func (d DefaultsConfig) validate(probs *problems) {
	if _, err := retry.Preset(d.Policy); err != nil {
		probs.add("defaults.policy", "unknown preset %q (known: %s)", d.Policy, strings.Join(retry.PresetNames(), ", "))
	}
	nonNegative(probs, "defaults.concurrency", d.Concurrency)
	nonNegative(probs, "defaults.max_replicas", d.MaxReplicas)
	nonNegative(probs, "defaults.timeout", d.Timeout)
	nonNegative(probs, "defaults.coding_timeout", d.CodingTimeout)
	if d.MaxRetries != nil && (*d.MaxRetries < 0 || *d.MaxRetries >= retry.MaxAttemptsLimit) {
		probs.add("defaults.max_retries", "must be in [0,%d], got %d", retry.MaxAttemptsLimit-1, *d.MaxRetries)
	}
}

func (f *File) validatePersonas(probs *problems) {
	if len(f.PersonaConfigs) == 0 {
		probs.add("personas", "at least one persona is required")
	}
	envNames := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(f.PersonaConfigs)) {
		path := "personas." + name
		if !personaNameRe.MatchString(name) {
			probs.add(path, "persona names use letters, digits, '-' and '_' (they are NATS subject tokens), got %q", name)
		}
		env := PersonaEnvName(name, "")
		if other, ok := envNames[env]; ok {
			probs.add(path, "shares its environment variables (%s*) with persona %s", env, other)
		}
		envNames[env] = name
		f.PersonaConfigs[name].validate(name, probs)
	}
}

func (p *PersonaConfig) validate(name string, probs *problems) {
	path := "personas." + name
	p.Invoker.validate(join(path, "invoker"), probs)
	if p.Timeout <= 0 {
		probs.add(join(path, "timeout"), "must be positive, got %s", p.Timeout)
	}
	nonNegative(probs, join(path, "concurrency"), p.Concurrency)
	nonNegative(probs, join(path, "max_replicas"), p.MaxReplicas)
	nonNegative(probs, join(path, "ack_wait"), p.AckWait)
	nonNegative(probs, join(path, "max_deliver"), p.MaxDeliver)
	n := len(*probs)
	pol := p.policy(name, probs)
	// The server's last delivery is quarantined unrun (max_deliveries), so
	// every attempt the policy allows needs a delivery before it.
	if len(*probs) == n && p.MaxDeliver > 0 && p.MaxDeliver <= pol.MaxAttempts {
		probs.add(join(path, "max_deliver"), "must be more than the policy's max_attempts (%d: its last delivery is quarantined without running), got %d", pol.MaxAttempts, p.MaxDeliver)
	}
}

// invokerFields lists the fields each invoker type uses.
var invokerFields = map[string][]string{
	InvokerHTTP:    {"url", "headers", "validation_on_422", "max_response_bytes"},
	InvokerCommand: {"path", "args", "env", "dir", "exit_codes", "stderr_tail", "kill_grace", "max_response_bytes"},
	InvokerDemo:    {"demo"},
}

func (iv InvokerConfig) validate(path string, probs *problems) {
	fields, ok := invokerFields[iv.Type]
	switch {
	case iv.Type == "":
		probs.add(join(path, "type"), "required (http, command or demo)")
		return
	case !ok:
		probs.add(join(path, "type"), "unknown invoker type %q (want http, command or demo)", iv.Type)
		return
	}
	set := map[string]bool{
		"url": iv.URL != "", "headers": iv.Headers != nil, "validation_on_422": iv.ValidationOn422,
		"max_response_bytes": iv.MaxResponseBytes != 0, "path": iv.Path != "", "args": iv.Args != nil,
		"env": iv.Env != nil, "dir": iv.Dir != "", "exit_codes": iv.ExitCodes != nil,
		"stderr_tail": iv.StderrTail != 0, "kill_grace": iv.KillGrace != 0, "demo": iv.Demo != "",
	}
	for _, f := range slices.Sorted(maps.Keys(set)) {
		if set[f] && !slices.Contains(fields, f) {
			probs.add(join(path, f), "not used by invoker type %s", iv.Type)
		}
	}
	nonNegative(probs, join(path, "max_response_bytes"), iv.MaxResponseBytes)
	switch iv.Type {
	case InvokerHTTP:
		iv.validateHTTP(path, probs)
	case InvokerCommand:
		iv.validateCommand(path, probs)
	case InvokerDemo:
		if _, ok := handlers.DemoPersonas()[iv.Demo]; !ok {
			known := strings.Join(slices.Sorted(maps.Keys(handlers.DemoPersonas())), ", ")
			if iv.Demo == "" {
				probs.add(join(path, "demo"), "required for type demo (one of %s)", known)
			} else {
				probs.add(join(path, "demo"), "unknown demo persona %q (known: %s)", iv.Demo, known)
			}
		}
	}
}

func (iv InvokerConfig) validateHTTP(path string, probs *problems) {
	u, err := url.Parse(iv.URL)
	switch {
	case iv.URL == "":
		probs.add(join(path, "url"), "required for type http")
	case err != nil:
		probs.add(join(path, "url"), "not a URL: %s", RedactURL(iv.URL))
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		probs.add(join(path, "url"), "want an absolute http(s) URL, got %s", RedactURL(iv.URL))
	case !handlers.ValidPort(u.Port()):
		probs.add(join(path, "url"), "port must be 1 to 65535, got %s", u.Port())
	}
	for _, k := range slices.Sorted(maps.Keys(iv.Headers)) {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			probs.add(join(path, "headers"), "invalid header name %q", k)
		}
		if strings.ContainsAny(iv.Headers[k], "\r\n") {
			probs.add(join(path, "headers."+k), "header values must be one line")
		}
	}
}

func (iv InvokerConfig) validateCommand(path string, probs *problems) {
	if iv.Path == "" {
		probs.add(join(path, "path"), "required for type command")
	}
	for _, k := range slices.Sorted(maps.Keys(iv.Env)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			probs.add(join(path, "env"), "invalid variable name %q", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(iv.ExitCodes)) {
		if _, err := exitCode(k, iv.ExitCodes[k]); err != nil {
			probs.add(join(path, "exit_codes."+k), "%v", err)
		}
	}
	nonNegative(probs, join(path, "stderr_tail"), iv.StderrTail)
	nonNegative(probs, join(path, "kill_grace"), iv.KillGrace)
}

// exitCode parses one exit_codes entry.
func exitCode(code, class string) (int, error) {
	n, err := strconv.Atoi(code)
	if err != nil || n < 0 || n > 255 {
		return 0, fmt.Errorf("exit codes run from 0 to 255, got %q", code)
	}
	c, err := retry.ParseClass(class)
	if err != nil || c > retry.ClassTerminal {
		return 0, fmt.Errorf("want succeeded, retryable, timeout, network, validation or terminal, got %q", class)
	}
	return n, nil
}

func nonNegative[T ~int | ~int64](probs *problems, field string, v T) {
	if v < 0 {
		if d, ok := any(v).(Duration); ok {
			probs.add(field, "must not be negative, got %s", d)
			return
		}
		probs.add(field, "must not be negative, got %d", v)
	}
}
