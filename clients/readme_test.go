package clients_test

import (
	"os"
	"regexp"
	"testing"
)

var pythonBlock = regexp.MustCompile("(?s)```python\n(.*?)```")

// TestReadmePythonLoopIsTheClientsExample holds the repository README's
// Python loop to the Python client README's first example, which the
// client's own tests run against a live personaq (tests/test_readme.py).
func TestReadmePythonLoopIsTheClientsExample(t *testing.T) {
	t.Parallel()
	top, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- readme-test: python -->\n```python\n(.*?)```").FindSubmatch(top)
	if m == nil {
		t.Fatal("README.md lost its Python loop (<!-- readme-test: python -->)")
	}
	own, err := os.ReadFile("python/README.md")
	if err != nil {
		t.Fatal(err)
	}
	first := pythonBlock.FindSubmatch(own)
	if first == nil || string(first[1]) != string(m[1]) {
		t.Fatalf("README.md's Python loop differs from clients/python/README.md's first example, which is the one run:\n%s", m[1])
	}
}
