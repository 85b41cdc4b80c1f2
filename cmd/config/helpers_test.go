package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/config"
)

// envOf looks variables up in m.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// parse loads src (dedented YAML) with env.
func parse(t *testing.T, src string, env map[string]string) (*config.File, error) {
	t.Helper()
	return config.Parse([]byte(dedent(src)), envOf(env))
}

// mustParse is parse that must succeed.
func mustParse(t *testing.T, src string, env map[string]string) *config.File {
	t.Helper()
	f, err := parse(t, src, env)
	require.NoError(t, err)
	return f
}

// problems lists the messages of a joined configuration error.
func problems(t *testing.T, err error) []string {
	t.Helper()
	require.ErrorIs(t, err, config.ErrInvalid)
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]string, len(errs))
	for i, e := range errs {
		var fe *config.FieldError
		require.ErrorAs(t, e, &fe)
		require.ErrorIs(t, e, config.ErrInvalid)
		out[i] = e.Error()
	}
	return out
}

// dedent removes the common leading tabs of a raw string literal's lines
// (YAML forbids tabs for indentation) and the first newline.
func dedent(s string) string {
	s = strings.TrimPrefix(s, "\n")
	lines := strings.Split(s, "\n")
	prefix := ""
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		p := l[:len(l)-len(strings.TrimLeft(l, "\t"))]
		if prefix == "" || len(p) < len(prefix) {
			prefix = p
		}
	}
	for i, l := range lines {
		lines[i] = strings.ReplaceAll(strings.TrimPrefix(l, prefix), "\t", "  ")
	}
	return strings.Join(lines, "\n")
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}
