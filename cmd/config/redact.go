package config

import (
	"fmt"
	"io"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Redaction is what a secret is replaced with.
const Redaction = "***"

// Redacted returns a deep copy of f with every secret replaced by
// Redaction: NATS password and token, Redis password, passwords in URLs
// (and query parameters named like secrets), HTTP header values and command
// environment values. File paths (creds_file, nkey_file, TLS keys) are
// kept: they say where a secret is, not what it is.
func (f *File) Redacted() *File {
	c := f.clone()
	c.NATS.Password = redact(c.NATS.Password)
	c.NATS.Token = redact(c.NATS.Token)
	for i, u := range c.NATS.URLs {
		c.NATS.URLs[i] = RedactURL(u)
	}
	c.Redis.Password = redact(c.Redis.Password)
	for i := range c.API.Tokens {
		c.API.Tokens[i].Token = redact(c.API.Tokens[i].Token)
	}
	c.Redis.URL = RedactURL(c.Redis.URL)
	for _, p := range c.PersonaConfigs {
		iv := &p.Invoker
		iv.URL = RedactURL(iv.URL)
		for k, v := range iv.Headers {
			iv.Headers[k] = redact(v)
		}
		for k, v := range iv.Env {
			iv.Env[k] = redact(v)
		}
	}
	return c
}

// WriteRedacted writes the redacted effective configuration as YAML: what
// `personaq config check` prints.
func (f *File) WriteRedacted(w io.Writer) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(f.Redacted()); err != nil {
		return fmt.Errorf("config: write: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("config: write: %w", err)
	}
	return nil
}

func redact(s string) string {
	if s == "" {
		return ""
	}
	return Redaction
}

// secretKeyRe matches query parameter names whose values are redacted.
var secretKeyRe = regexp.MustCompile(`(?i)pass|secret|token|key|auth|sig|cred`)

// redactUserinfo hides everything before the last '@' (after "//", if
// any) of a URL that did not parse, or that has no "//" (NATS takes
// "user:password@host:4222"): whatever it is, it may be a password.
func redactUserinfo(raw string) string {
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return raw
	}
	start := 0
	if i := strings.Index(raw, "//"); i >= 0 && i < at {
		start = i + 2
	}
	return raw[:start] + Redaction + raw[at:]
}

// RedactURL replaces the password in a URL's userinfo, and the values of
// query parameters whose names look secret (password, token, key, …), by
// Redaction: redis://:secret@host:6379 → redis://:***@host:6379. The rest
// of the URL is kept as written.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	scheme, rest, ok := strings.Cut(raw, "//")
	if err != nil || !ok {
		return redactUserinfo(raw)
	}
	if _, hasPassword := u.User.Password(); hasPassword {
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		at := strings.LastIndex(rest[:end], "@")
		name, _, _ := strings.Cut(rest[:at], ":")
		rest = name + ":" + Redaction + "@" + rest[at+1:]
	}
	base, query, ok := strings.Cut(rest, "?")
	if !ok {
		return scheme + "//" + rest
	}
	query, fragment, hasFragment := strings.Cut(query, "#")
	params := strings.Split(query, "&")
	for i, kv := range params {
		k, _, _ := strings.Cut(kv, "=")
		if name, err := url.QueryUnescape(k); (err == nil && secretKeyRe.MatchString(name)) || secretKeyRe.MatchString(k) {
			params[i] = k + "=" + Redaction
		}
	}
	out := scheme + "//" + base + "?" + strings.Join(params, "&")
	if hasFragment {
		out += "#" + fragment
	}
	return out
}

// clone copies f deeply enough that Redacted can change the copy.
func (f *File) clone() *File {
	c := *f
	c.NATS.URLs = slices.Clone(f.NATS.URLs)
	c.Redis.Addrs = slices.Clone(f.Redis.Addrs)
	c.Redis.Sentinel.Addrs = slices.Clone(f.Redis.Sentinel.Addrs)
	c.Limiters = maps.Clone(f.Limiters)
	c.API.Tokens = slices.Clone(f.API.Tokens)
	if f.PersonaConfigs != nil {
		c.PersonaConfigs = make(map[string]*PersonaConfig, len(f.PersonaConfigs))
	}
	for name, p := range f.PersonaConfigs {
		pc := *p
		pc.Invoker.Headers = maps.Clone(p.Invoker.Headers)
		pc.Invoker.Env = maps.Clone(p.Invoker.Env)
		pc.Invoker.ExitCodes = maps.Clone(p.Invoker.ExitCodes)
		pc.Invoker.Args = slices.Clone(p.Invoker.Args)
		pc.Policy.NonRetryable = slices.Clone(p.Policy.NonRetryable)
		if p.Policy.Schedule != nil {
			s := *p.Policy.Schedule
			s.Delays = slices.Clone(s.Delays)
			pc.Policy.Schedule = &s
		}
		c.PersonaConfigs[name] = &pc
	}
	return &c
}
