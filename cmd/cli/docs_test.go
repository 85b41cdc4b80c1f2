package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/cli"
)

// repoRoot is the repository's root, made absolute while the working
// directory is still this package's.
var repoRoot = func() string {
	abs, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return abs
}()

// docOwners are the pages whose code blocks another test runs: the named
// test file must name the page, so a page cannot be listed here without a
// test that reads it.
var docOwners = map[string]string{
	"docs/api.md":        "cmd/api/docs_test.go",        // every shell block run against a live server
	"docs/wire.md":       "cmd/api/docs_test.go",        // its Go program built and run
	"docs/personas.md":   "handlers/personadoc_test.go", // its examples fed to the invokers
	"docs/cli.md":        "cmd/cli/docgen_test.go",      // generated, held current
	"docs/output.md":     "cmd/api/outputdoc_test.go",   // every block run or fed to the server
	"docs/durability.md": "cmd/cli/migrate_doc_test.go", // its migration run with the built binary
}

// readmeOwners are the README's marked blocks and the tests that run them.
var readmeOwners = map[string]string{
	"python": "clients/readme_test.go",                 // the Python client's first example, run by its tests
	"go":     "consumers/client/readme_test.go",        // built and run against a live replica
	"shell":  "cmd/cli/readme_test.go",                 // each line run, its exit code checked
	"ts":     "clients/typescript/test/readme.test.ts", // an example file, compiled by tsc and run
}

// docBlock is one fenced code block of a Markdown file, with the marker
// comment on the line before it, if any.
type docBlock struct {
	lang, text, marker string
	line               int
}

var (
	docFence  = regexp.MustCompile("(?m)^```([a-z]*)\n")
	docMarker = regexp.MustCompile(`<!-- readme-test: ([a-z]+) -->\n$`)
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

func docBlocks(t *testing.T, src string) []docBlock {
	t.Helper()
	var out []docBlock
	off := 0
	for {
		loc := docFence.FindStringSubmatchIndex(src[off:])
		if loc == nil {
			return out
		}
		start, body := off+loc[0], off+loc[1]
		end := strings.Index(src[body:], "\n```\n")
		if strings.HasPrefix(src[body:], "```\n") {
			end = -1 // an empty block
		}
		require.GreaterOrEqual(t, end, 0, "unclosed block at line %d", strings.Count(src[:start], "\n")+1)
		b := docBlock{lang: src[off+loc[2] : off+loc[3]], text: src[body : body+end+1], line: strings.Count(src[:start], "\n") + 1}
		if m := docMarker.FindStringSubmatch(src[:start]); m != nil {
			b.marker = m[1]
		}
		out = append(out, b)
		off = body + end + 4
	}
}

// docPages lists README.md, BENCHMARKS.md and every page of docs/,
// relative to the root.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	out := []string{"README.md", "BENCHMARKS.md"}
	for _, p := range pages {
		rel, err := filepath.Rel(repoRoot, p)
		require.NoError(t, err)
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// TestDocCodeBlocksAreChecked holds every code block of README.md,
// BENCHMARKS.md and docs/*.md to a test: a page another test runs must be
// named by that test; the README's marked blocks are run by theirs; every
// other block is checked here by its language — shell commands parsed
// against the command tree (and the whole block by bash -n), a go test
// command's benchmark looked up, transcripts' commands the same, YAML
// through config check, JSON parsed. A block of any other kind, or a
// Go, Python or TypeScript block no test runs, fails: a new page cannot
// show code nothing checks.
//
// Not parallel: config check resolves a persona's command path from the
// working directory, which is the repository's root here, as for a reader.
func TestDocCodeBlocksAreChecked(t *testing.T) {
	t.Chdir(repoRoot)
	for _, page := range docPages(t) {
		raw, err := os.ReadFile(filepath.Join(repoRoot, page))
		require.NoError(t, err)
		if owner, ok := docOwners[page]; ok {
			requireNames(t, owner, strings.TrimPrefix(page, "docs/"))
			continue
		}
		prev := ""
		for _, b := range docBlocks(t, string(raw)) {
			where := fmt.Sprintf("%s:%d", page, b.line)
			if b.marker != "" {
				owner, ok := readmeOwners[b.marker]
				require.True(t, ok, "%s: no test runs readme-test %q blocks", where, b.marker)
				require.Equal(t, "README.md", page, "%s: readme-test markers are run in README.md only", where)
				requireNames(t, owner, "README.md")
			}
			switch b.lang {
			case "sh":
				checkShell(t, where, b.text)
			case "text":
				if !checkTranscript(t, where, b.text) {
					assert.Equal(t, "sh", prev, "%s: a text block must be a transcript ($ lines) or the output of the sh block before it", where)
				}
			case "yaml":
				checkConfig(t, where, b.text)
			case "json":
				assert.True(t, json.Valid([]byte(b.text)), "%s: JSON", where)
			case "go", "python":
				assert.NotEmpty(t, b.marker, "%s: a %s block no test runs (mark it and run it, or drop it)", where, b.lang)
			case "ts":
				require.Equal(t, "README.md", page, "%s: a TypeScript block no test runs", where)
				requireNames(t, readmeOwners["ts"], "README.md")
			default:
				t.Errorf("%s: a %q block no test checks", where, b.lang)
			}
			prev = b.lang
		}
	}
}

// TestDocLinksResolve checks every relative link of README.md and
// docs/*.md points at a file or directory of the repository, and a link to
// a heading of a Markdown page at a heading that page has.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	for _, page := range docPages(t) {
		raw, err := os.ReadFile(filepath.Join(repoRoot, page))
		require.NoError(t, err)
		for _, m := range mdLink.FindAllStringSubmatch(string(raw), -1) {
			target, frag, _ := strings.Cut(m[1], "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := filepath.Join(repoRoot, filepath.Dir(page), target)
			if target == "" {
				path = filepath.Join(repoRoot, page)
			}
			if _, err := os.Stat(path); !assert.NoError(t, err, "%s links to %s", page, m[1]) {
				continue
			}
			if frag != "" && strings.HasSuffix(path, ".md") {
				assert.Contains(t, headingAnchors(t, path), frag, "%s links to %s: no such heading", page, m[1])
			}
		}
	}
}

// headingAnchors lists the anchors GitHub gives the headings of a
// Markdown file: lower case, punctuation dropped, spaces as dashes, a
// repeated one numbered. Headings inside code blocks do not count.
func headingAnchors(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	seen := map[string]int{}
	var out []string
	inBlock := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if inBlock || !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", a, n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}

// requireNames fails unless the test file at path (from the root) names page.
func requireNames(t *testing.T, path, page string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot, path))
	require.NoError(t, err, "the test that runs %s", page)
	require.Contains(t, string(src), page, "%s is said to run %s but does not read it", path, page)
}

// checkShell checks a block with bash -n, then each command line.
func checkShell(t *testing.T, where, text string) {
	t.Helper()
	cmd := exec.Command("bash", "-n")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "%s: bash -n: %s", where, out)
	for i, line := range strings.Split(text, "\n") {
		checkCommand(t, fmt.Sprintf("%s+%d", where, i+1), line)
	}
}

// checkTranscript checks the commands of a transcript's "$ " lines and
// says whether it had any.
func checkTranscript(t *testing.T, where, text string) bool {
	t.Helper()
	n := 0
	for i, line := range strings.Split(text, "\n") {
		if cmdline, ok := strings.CutPrefix(line, "$ "); ok {
			checkCommand(t, fmt.Sprintf("%s+%d", where, i+1), cmdline)
			n++
		}
	}
	return n > 0
}

// checkCommand checks one command line: a personaq command must name
// commands and flags the tree has, with arguments its command accepts; a
// make target must be in the Makefile; a go run or go install path must
// exist. Anything else is left to bash -n.
func checkCommand(t *testing.T, where, line string) {
	t.Helper()
	words := commandWords(line)
	for len(words) > 0 && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(words[0]) {
		words = words[1:] // VAR=value before the command
	}
	if len(words) == 0 {
		return
	}
	switch {
	case words[0] == "personaq":
		checkPersonaq(t, where, words[1:])
	case len(words) > 2 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/personaq":
		checkPersonaq(t, where, words[3:])
	case len(words) > 2 && words[0] == "go" && (words[1] == "run" || words[1] == "install") && strings.HasPrefix(words[2], "./"):
		_, err := os.Stat(filepath.Join(repoRoot, words[2]))
		assert.NoError(t, err, "%s: %s", where, line)
	case len(words) > 2 && words[0] == "go" && words[1] == "test":
		checkGoTest(t, where, words[2:])
	case words[0] == "make":
		mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
		require.NoError(t, err)
		for _, target := range words[1:] {
			if !strings.Contains(target, "=") {
				assert.Regexp(t, "(?m)^"+regexp.QuoteMeta(target)+":", string(mk), "%s: make %s", where, target)
			}
		}
	}
}

// checkGoTest checks a go test command's packages exist and its -bench
// pattern's first level names a benchmark of one of them, so a figure's
// command still runs what measured it.
func checkGoTest(t *testing.T, where string, args []string) {
	t.Helper()
	var bench string
	var pkgs []string
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "-bench="):
			bench = strings.TrimPrefix(a, "-bench=")
		case a == "-bench" && i+1 < len(args):
			bench = args[i+1]
		case strings.HasPrefix(a, "./"):
			pkgs = append(pkgs, a)
		}
	}
	if !assert.NotEmpty(t, pkgs, "%s: go test names no package", where) || bench == "" {
		return
	}
	top, _, _ := strings.Cut(bench, "/")
	re, err := regexp.Compile(top)
	if !assert.NoError(t, err, "%s: -bench %s", where, bench) {
		return
	}
	found := false
	for _, pkg := range pkgs {
		files, err := filepath.Glob(filepath.Join(repoRoot, pkg, "*_test.go"))
		require.NoError(t, err)
		assert.NotEmpty(t, files, "%s: %s has no tests", where, pkg)
		for _, f := range files {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, m := range benchFunc.FindAllStringSubmatch(string(src), -1) {
				found = found || re.MatchString(m[1])
			}
		}
	}
	assert.True(t, found, "%s: -bench %s matches no benchmark of %v", where, bench, pkgs)
}

var benchFunc = regexp.MustCompile(`(?m)^func (Benchmark\w*)\(b \*testing\.B\)`)

// checkPersonaq finds the command args name and parses its flags and
// arguments the way running it would, without running it.
func checkPersonaq(t *testing.T, where string, args []string) {
	t.Helper()
	for _, a := range args {
		if a == "--version" || a == "--help" || a == "-h" {
			return
		}
	}
	cmdline := "personaq " + strings.Join(args, " ")
	root := cli.NewRoot(io.Discard, io.Discard)
	c, rest, err := root.Find(args)
	if !assert.NoError(t, err, "%s: %s", where, cmdline) {
		return
	}
	if !assert.NoError(t, c.ParseFlags(rest), "%s: %s", where, cmdline) {
		return
	}
	assert.True(t, c.Runnable(), "%s: %s: %s needs a subcommand", where, cmdline, c.CommandPath())
	assert.NoError(t, c.ValidateArgs(c.Flags().Args()), "%s: %s", where, cmdline)
}

// commandWords splits a shell line into words (single and double quotes,
// backslash escapes), stopping at a comment, a background &, a pipe, a
// list operator or a redirection: what follows is not the command's.
func commandWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '\\' && i+1 < len(rs):
			i++
			cur.WriteRune(rs[i])
			inWord = true
		case r == ' ' || r == '\t':
			flush()
		case r == '#' && !inWord, r == '&', r == '|', r == ';', r == '>', r == '<':
			if r == '>' && inWord && cur.String() == "2" { // 2>file
				cur.Reset()
				inWord = false
			}
			flush()
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	flush()
	return words
}

// checkConfig runs personaq config check on a YAML block.
func checkConfig(t *testing.T, where, text string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "personaq.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), []string{"config", "check", path}, &out, &errb)
	assert.Equal(t, 0, code, "%s: personaq config check:\n%s%s", where, out.String(), errb.String())
}
