package testenv

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Block is one fenced code block of a Markdown file: its language, its
// text (with the final newline) and the line its opening fence is on.
type Block struct {
	Lang, Text string
	Line       int
}

var fence = regexp.MustCompile("(?m)^```([a-z]*)\n")

// MarkdownBlocks returns the fenced code blocks of the Markdown file at
// path, in order, for tests that run or compile every block of a page.
func MarkdownBlocks(tb testing.TB, path string) []Block {
	tb.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	src := string(raw)
	var out []Block
	for {
		loc := fence.FindStringSubmatchIndex(src)
		if loc == nil {
			return out
		}
		end := strings.Index(src[loc[1]:], "\n```\n")
		if end < 0 {
			tb.Fatalf("testenv: unclosed block in %s", path)
		}
		line := strings.Count(string(raw[:len(raw)-len(src)+loc[0]]), "\n") + 1
		out = append(out, Block{Lang: src[loc[2]:loc[3]], Text: src[loc[1] : loc[1]+end+1], Line: line})
		src = src[loc[1]+end+4:]
	}
}
