package config

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
)

// API token scopes (what `personaq api` accepts in api.tokens[].scopes).
var apiScopes = []string{"submit", "read", "cancel", "admin"}

// DefaultAPIListen is where `personaq api` listens unless told otherwise.
const DefaultAPIListen = "127.0.0.1:8081"

// APIConfig configures `personaq api`, the HTTP API server (see
// docs/api.md). The environment variable PERSONAQ_API_TOKEN adds a token
// with every scope, named "env", to the ones listed here.
type APIConfig struct {
	// Listen is the host:port to serve on. Default: "127.0.0.1:8081"
	// (--listen wins).
	Listen string `yaml:"listen"`
	// TLSCert and TLSKey are PEM files: both or neither; with them the API
	// serves HTTPS.
	TLSCert string `yaml:"tls_cert,omitempty"`
	TLSKey  string `yaml:"tls_key,omitempty"`
	// Tokens are the named bearer tokens the API accepts.
	Tokens []APIToken `yaml:"tokens,omitempty"`
	// IndexSize bounds the in-memory request index behind GET
	// /v1/requests. Default: 100000.
	IndexSize int `yaml:"index_size,omitempty"`
}

// APIToken is one named bearer token: exactly one of Token, TokenEnv and
// TokenFile gives its secret.
type APIToken struct {
	// Name is what logs say instead of the secret. Required.
	Name string `yaml:"name"`
	// Token is the secret itself (prefer TokenEnv or TokenFile).
	Token string `yaml:"token,omitempty"`
	// TokenEnv names an environment variable holding the secret.
	TokenEnv string `yaml:"token_env,omitempty"`
	// TokenFile is a file holding the secret (trailing newline trimmed).
	TokenFile string `yaml:"token_file,omitempty"`
	// Scopes it allows: submit, read, cancel, admin. Required.
	Scopes []string `yaml:"scopes"`
}

// ResolvedToken is an APIToken with its secret read.
type ResolvedToken struct {
	Name   string
	Secret string
	Scopes []string
}

// ResolveTokens reads every token's secret (env looks variables up; nil:
// os.LookupEnv). The errors name the token, never its secret.
func (c APIConfig) ResolveTokens(env func(string) (string, bool)) ([]ResolvedToken, error) {
	if env == nil {
		env = os.LookupEnv
	}
	out := make([]ResolvedToken, 0, len(c.Tokens))
	for i, t := range c.Tokens {
		secret := t.Token
		switch {
		case t.TokenEnv != "":
			v, ok := env(t.TokenEnv)
			if !ok || v == "" {
				return nil, fmt.Errorf("%w: api.tokens[%d] (%s): token_env %s is not set", ErrInvalid, i, t.Name, t.TokenEnv)
			}
			secret = v
		case t.TokenFile != "":
			data, err := os.ReadFile(t.TokenFile)
			if err != nil {
				return nil, fmt.Errorf("%w: api.tokens[%d] (%s): token_file: %w", ErrInvalid, i, t.Name, err)
			}
			secret = strings.TrimRight(string(data), "\r\n")
		}
		out = append(out, ResolvedToken{Name: t.Name, Secret: secret, Scopes: slices.Clone(t.Scopes)})
	}
	return out, nil
}

func (c APIConfig) validate(probs *problems) {
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			probs.add("api.listen", "want host:port, got %q", c.Listen)
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		probs.add("api.tls_cert", "tls_cert and tls_key go together")
	}
	if c.IndexSize < 0 {
		probs.add("api.index_size", "must not be negative")
	}
	names := map[string]bool{}
	for i, t := range c.Tokens {
		path := fmt.Sprintf("api.tokens[%d]", i)
		if t.Name == "" {
			probs.add(path+".name", "required")
		} else if names[t.Name] {
			probs.add(path+".name", "%q is used by another token", t.Name)
		}
		names[t.Name] = true
		set := 0
		for _, s := range []string{t.Token, t.TokenEnv, t.TokenFile} {
			if s != "" {
				set++
			}
		}
		if set != 1 {
			probs.add(path, "exactly one of token, token_env and token_file")
		}
		if t.Token != "" && len(t.Token) < 16 {
			probs.add(path+".token", "at least 16 characters")
		}
		if len(t.Scopes) == 0 {
			probs.add(path+".scopes", "at least one of %s", strings.Join(apiScopes, ", "))
		}
		for _, s := range t.Scopes {
			if !slices.Contains(apiScopes, s) {
				probs.add(path+".scopes", "%q is not one of %s", s, strings.Join(apiScopes, ", "))
			}
		}
	}
}
