package cli_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	readmeShellBlock = regexp.MustCompile("(?s)<!-- readme-test: shell -->\n```sh\n(.*?)```")
	readmeShellLine  = regexp.MustCompile(`^personaq (.*?)\s+# exit (\d+)$`)
)

// TestReadmeShellLoopExitsAsDocumented runs each command of the README's
// shell loop against a replica serving the demo personas and holds it to
// the exit code the README gives.
func TestReadmeShellLoopExitsAsDocumented(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	m := readmeShellBlock.FindSubmatch(raw)
	require.NotNil(t, m, "README.md lost its shell loop (<!-- readme-test: shell -->)")
	url, _ := serveDemo(t, "flaky", "terminal")
	lines := strings.Split(strings.TrimSpace(string(m[1])), "\n")
	require.NotEmpty(t, lines)
	for _, line := range lines {
		lm := readmeShellLine.FindStringSubmatch(line)
		require.NotNil(t, lm, "README shell line %q: want `personaq ARGS  # exit N`", line)
		want, _ := strconv.Atoi(lm[2])
		args := append([]string{"--nats-url", url}, shellWords(t, lm[1])...)
		code, out, errOut := run(t, context.Background(), args...)
		require.Equal(t, want, code, "%s\nstdout: %s\nstderr: %s", line, out, errOut)
	}
}

// shellWords splits a command line the way sh would for the plain words
// and single-quoted strings the README uses.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	require.False(t, quoted, "unbalanced quote in %q", s)
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
