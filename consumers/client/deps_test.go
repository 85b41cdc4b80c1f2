package client_test

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// maxClientDeps bounds the non-standard packages a program importing the
// client compiles: nats.go, the schemas, the retry policy types and the
// OpenTelemetry API (73 when the bound was set). The runtime (watermill,
// go-redis), the OpenTelemetry SDK with its exporters and gRPC, the YAML
// config, the console and the metrics belong to the binary (cmd/), and
// any of them in the client's graph costs well over a hundred packages.
const maxClientDeps = 130

// serverOnly are packages a client must never import, whatever the count:
// the runtime and what only the binary needs ("/..." matches the path and
// everything under it, as in go list patterns).
var serverOnly = []string{
	"github.com/personaq/personaq/consumers",
	"github.com/personaq/personaq/cmd/...",
	"github.com/ThreeDotsLabs/watermill/...",
	"github.com/redis/go-redis/...",
	"go.opentelemetry.io/otel/sdk/...",
	"google.golang.org/grpc/...",
	"github.com/prometheus/...",
}

func matches(pattern, pkg string) bool {
	base, tree := strings.CutSuffix(pattern, "/...")
	return pkg == base || tree && strings.HasPrefix(pkg, base+"/")
}

// TestClientCarriesNoServer: the library a user imports is the library,
// not the server (go list -deps, as CI builds it): this package, and the
// HTTP API the Python and TypeScript clients call, which is built on it.
func TestClientCarriesNoServer(t *testing.T) {
	t.Parallel()
	for name, dir := range map[string]string{"Client": ".", "HTTPAPI": "../../cmd/api"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			graph, root := importGraph(t, dir)
			deps := reachable(graph, root)
			var server []string
			for _, p := range deps {
				if p != root && slices.ContainsFunc(serverOnly, func(s string) bool { return matches(s, p) }) {
					server = append(server, p)
				}
			}
			if len(deps) > maxClientDeps || len(server) > 0 {
				t.Errorf("%s compiles %d non-standard packages (at most %d); server-only ones: %v\nheaviest imports:\n%s",
					root, len(deps), maxClientDeps, server, heaviest(graph, root))
			}
			t.Logf("%s: %d non-standard packages", root, len(deps))
		})
	}
}

// importGraph is the non-standard import graph of the package in dir, from
// go list, and the package's own path.
func importGraph(t *testing.T, dir string) (map[string][]string, string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to list the client's imports: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f",
		`{{if not .Standard}}{{.ImportPath}} {{join .Imports " "}}{{end}}`, dir).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	graph := map[string][]string{}
	var root string
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		graph[f[0]] = f[1:]
		root = f[0] // -deps lists a package after everything it imports
	}
	return graph, root
}

// reachable lists the non-standard packages from imports, root included.
func reachable(graph map[string][]string, from string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		if _, ok := graph[p]; !ok || seen[p] {
			return
		}
		seen[p] = true
		for _, q := range graph[p] {
			walk(q)
		}
	}
	walk(from)
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// heaviest lists root's direct non-standard imports by how many packages
// each brings, most first: where to look when the bound is passed.
func heaviest(graph map[string][]string, root string) string {
	type weight struct {
		pkg string
		n   int
	}
	var ws []weight
	for _, p := range graph[root] {
		if _, ok := graph[p]; ok {
			ws = append(ws, weight{p, len(reachable(graph, p))})
		}
	}
	slices.SortFunc(ws, func(a, b weight) int { return b.n - a.n })
	var b strings.Builder
	for _, w := range ws {
		fmt.Fprintf(&b, "  %5d %s\n", w.n, w.pkg)
	}
	return b.String()
}
