package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/config"
)

func TestAPITokens(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tok")
	require.NoError(t, os.WriteFile(file, []byte("secret-from-a-file-0001\n"), 0o600))
	f, err := config.Parse([]byte(dedent(echoOnly)+`
api:
  listen: 0.0.0.0:8081
  tokens:
    - {name: inline, token: secret-inline-00000001, scopes: [submit, read]}
    - {name: fromenv, token_env: MY_API_TOKEN, scopes: [read]}
    - {name: fromfile, token_file: `+file+`, scopes: [admin]}
`), nil)
	require.NoError(t, err)
	toks, err := f.API.ResolveTokens(func(k string) (string, bool) {
		if k == "MY_API_TOKEN" {
			return "secret-from-the-env-01", true
		}
		return "", false
	})
	require.NoError(t, err)
	require.Equal(t, []config.ResolvedToken{
		{Name: "inline", Secret: "secret-inline-00000001", Scopes: []string{"submit", "read"}},
		{Name: "fromenv", Secret: "secret-from-the-env-01", Scopes: []string{"read"}},
		{Name: "fromfile", Secret: "secret-from-a-file-0001", Scopes: []string{"admin"}},
	}, toks)
	_, err = f.API.ResolveTokens(func(string) (string, bool) { return "", false })
	require.ErrorContains(t, err, "MY_API_TOKEN is not set")

	var out strings.Builder
	require.NoError(t, f.WriteRedacted(&out))
	require.NotContains(t, out.String(), "secret-inline")
	require.Equal(t, "secret-inline-00000001", f.API.Tokens[0].Token, "redaction works on a copy")
}

func TestAPIConfigProblems(t *testing.T) {
	t.Parallel()
	_, err := config.Parse([]byte(dedent(echoOnly)+`
api:
  listen: nowhere
  tls_cert: c.pem
  tokens:
    - {name: a, token: short, scopes: [read]}
    - {name: a, token: x, token_env: Y, scopes: [write]}
    - {token: long-enough-secret-000}
`), nil)
	require.True(t, errors.Is(err, config.ErrInvalid))
	for _, want := range []string{"api.listen", "api.tls_cert", "api.tokens[0].token: at least 16", "api.tokens[1].name",
		"api.tokens[1]: exactly one", `api.tokens[1].scopes: "write"`, "api.tokens[2].name: required", "api.tokens[2].scopes"} {
		require.ErrorContains(t, err, want)
	}
}
