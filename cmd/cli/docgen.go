package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// WriteReference writes the Markdown reference of root's command tree:
// every visible command with its usage, description, flags and
// subcommands, depth first in cobra's order (sorted by name), so the same
// tree always gives the same bytes. It walks the tree itself rather than
// using cobra/doc, whose package also pulls in a man-page renderer.
//
// Flag defaults are printed as the tree holds them: build root with the
// environment the defaults read (NATS_URL, …) cleared to get the
// documented ones.
func WriteReference(w io.Writer, root *cobra.Command) error {
	var b strings.Builder
	b.WriteString("# The personaq command line\n\n")
	b.WriteString("Generated from the command tree (`make docs`); `go test ./cmd/cli/` fails when this page is\n")
	b.WriteString("not current. Every command also takes the global flags of [`personaq`](#personaq).\n")
	b.WriteString("Exit codes of the commands that wait for a request: 0 succeeded, 3 blocked, 4 deferred,\n")
	b.WriteString("5 escalated, 6 step deadline exceeded, 7 cancelled, 1 anything else.\n\n")
	b.WriteString("**Commands:**")
	walk(root, func(c *cobra.Command) {
		if c != root {
			fmt.Fprintf(&b, " [%s](#%s) ·", strings.TrimPrefix(c.CommandPath(), root.Name()+" "), anchor(c))
		}
	})
	out := strings.TrimSuffix(b.String(), " ·") + "\n"
	b.Reset()
	b.WriteString(out)
	walk(root, func(c *cobra.Command) { writeCommand(&b, c, c == root) })
	_, err := io.WriteString(w, b.String())
	return err
}

// walk calls fn for c and every visible command under it, depth first.
func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		if visible(sub) {
			walk(sub, fn)
		}
	}
}

// visible leaves out hidden commands and the ones cobra adds at run time.
func visible(c *cobra.Command) bool {
	return !c.Hidden && c.Name() != "help" && c.Name() != "completion"
}

// anchor is the heading's GitHub anchor: the command path with spaces as
// dashes.
func anchor(c *cobra.Command) string {
	return strings.ReplaceAll(c.CommandPath(), " ", "-")
}

func writeCommand(b *strings.Builder, c *cobra.Command, isRoot bool) {
	fmt.Fprintf(b, "\n## %s\n\n", c.CommandPath())
	if c.Short != "" {
		fmt.Fprintf(b, "%s.\n\n", strings.TrimSuffix(c.Short, "."))
	}
	fmt.Fprintf(b, "Usage: `%s`", c.UseLine())
	if len(c.Aliases) > 0 {
		fmt.Fprintf(b, " (aliases: %s)", strings.Join(c.Aliases, ", "))
	}
	b.WriteString("\n")
	if long := strings.TrimSpace(c.Long); long != "" {
		fmt.Fprintf(b, "\n```text\n%s\n```\n", long)
	}
	if ex := strings.TrimRight(c.Example, " \n"); ex != "" {
		fmt.Fprintf(b, "\n```text\n%s\n```\n", ex)
	}
	flags := c.LocalNonPersistentFlags()
	if isRoot {
		flags = c.PersistentFlags()
	}
	writeFlags(b, flags)
	var subs []string
	for _, sub := range c.Commands() {
		if visible(sub) {
			subs = append(subs, fmt.Sprintf("[%s](#%s)", sub.Name(), anchor(sub)))
		}
	}
	if len(subs) > 0 {
		fmt.Fprintf(b, "\nCommands: %s.\n", strings.Join(subs, ", "))
	}
}

func writeFlags(b *strings.Builder, fs *pflag.FlagSet) {
	var rows []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		name := "`--" + f.Name
		if f.Shorthand != "" {
			name = "`-" + f.Shorthand + ", --" + f.Name
		}
		if t := f.Value.Type(); t != "bool" {
			name += " " + t
		}
		name += "`"
		def := ""
		switch f.DefValue {
		case "", "false", "0", "0s", "[]", "map[]":
		default:
			def = "`" + f.DefValue + "`"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s |", name, cell(def), cell(f.Usage)))
	})
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n| flag | default | |\n|---|---|---|\n")
	b.WriteString(strings.Join(rows, "\n"))
	b.WriteString("\n")
}

// cell keeps a value on one table row.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
