package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/config"
)

// A command persona that could never run is refused at start, naming its
// field, instead of quarantining every request it gets.
func TestCheckInvokersRefusesCommandsThatCannotRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(agent, []byte("#!/bin/sh\necho '{}'\n"), 0o755))
	notExec := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(notExec, []byte("x"), 0o644))
	tests := []struct {
		name, path, dir, want string
	}{
		{"Missing", filepath.Join(dir, "nope"), "", `personas.p.invoker.path: command "` + filepath.Join(dir, "nope") + `" does not exist`},
		{"NotExecutable", notExec, "", `personas.p.invoker.path: command "` + notExec + `" is not executable (mode -rw-r--r--; chmod +x it)`},
		{"Directory", dir, "", `personas.p.invoker.path: command "` + dir + `" is not a regular file (d---------)`},
		{"NotInPath", "no-such-agent-xyz", "", `personas.p.invoker.path: command "no-such-agent-xyz" not found in PATH`},
		{"RelativeToDir", "./nope.sh", dir, `personas.p.invoker.path: command "` + filepath.Join(dir, "nope.sh") + `" does not exist`},
		{"Runs", agent, "", ""},
		{"RunsRelativeToDir", "./agent.sh", dir, ""},
		{"InPath", "sh", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &config.File{PersonaConfigs: map[string]*config.PersonaConfig{
				"p": {Invoker: config.InvokerConfig{Type: config.InvokerCommand, Path: tt.path, Dir: tt.dir}},
				"h": {Invoker: config.InvokerConfig{Type: config.InvokerHTTP, URL: "http://127.0.0.1:1/unreachable-is-fine"}},
			}}
			err := f.CheckInvokers()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, config.ErrInvalid)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}
