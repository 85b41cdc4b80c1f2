package cli_test

import (
	"bytes"
	"flag"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/cli"
)

// updateDocs rewrites docs/cli.md instead of comparing it (make docs).
var updateDocs = flag.Bool("update-docs", false, "rewrite docs/cli.md from the command tree")

const cliReference = "../../docs/cli.md"

// envInUsage finds the variables a flag's default is read from: by
// convention its usage says "(env NAME)".
var envInUsage = regexp.MustCompile(`env ([A-Z][A-Z0-9_]+)`)

// documentedRoot builds the command tree with every environment variable
// its flags' defaults read cleared, so the reference shows the built-in
// defaults whatever the shell that runs the test has set. Not parallel:
// it changes the environment.
func documentedRoot(t *testing.T) *cobra.Command {
	t.Helper()
	clear := map[string]bool{}
	var collect func(*cobra.Command)
	collect = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			for _, m := range envInUsage.FindAllStringSubmatch(f.Usage, -1) {
				clear[m[1]] = true
			}
		})
		for _, sub := range c.Commands() {
			collect(sub)
		}
	}
	collect(cli.NewRoot(io.Discard, io.Discard))
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "PERSONAQ_") {
			clear[name] = true
		}
	}
	for name := range clear {
		t.Setenv(name, "")
	}
	return cli.NewRoot(io.Discard, io.Discard)
}

// TestCLIReferenceIsCurrent holds docs/cli.md to the command tree: a flag
// or command added, renamed or reworded fails here until `make docs` is
// run.
func TestCLIReferenceIsCurrent(t *testing.T) {
	var got bytes.Buffer
	require.NoError(t, cli.WriteReference(&got, documentedRoot(t)))
	if *updateDocs {
		require.NoError(t, os.WriteFile(cliReference, got.Bytes(), 0o644))
		return
	}
	want, err := os.ReadFile(cliReference)
	require.NoError(t, err)
	require.Equal(t, string(want), got.String(), "docs/cli.md is not current: run make docs")

	// The same tree gives the same bytes.
	var again bytes.Buffer
	require.NoError(t, cli.WriteReference(&again, documentedRoot(t)))
	require.Equal(t, got.String(), again.String())
}

// TestCLIReferenceNamesEveryCommand checks the generator against the tree
// it walks: each visible command has its heading and each of its own
// flags a row, so a generator that skips part of the tree fails.
func TestCLIReferenceNamesEveryCommand(t *testing.T) {
	root := documentedRoot(t)
	var out bytes.Buffer
	require.NoError(t, cli.WriteReference(&out, root))
	page := out.String()
	n := 0
	var check func(*cobra.Command)
	check = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		n++
		require.Contains(t, page, "\n## "+c.CommandPath()+"\n")
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				require.Contains(t, page, "--"+f.Name, "%s --%s", c.CommandPath(), f.Name)
			}
		})
		for _, sub := range c.Commands() {
			check(sub)
		}
	}
	check(root)
	require.Greater(t, n, 20, "the generator walked the whole tree")
}
