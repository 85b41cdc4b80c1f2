package cli_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

// TestDurabilityDocMigrationRuns runs the shell block of docs/durability.md
// with the personaq binary against a server whose requests stream is a
// work queue holding three requests (as an earlier version left it); the
// text block after it is its exact output.
func TestDurabilityDocMigrationRuns(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "personaq")
	build := exec.Command("go", "build", "-o", bin, "github.com/personaq/personaq/cmd/personaq")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	ctx := context.Background()
	n := testenv.StartNATS(t)
	js := n.JetStream(t)
	topo := wire.Topology{}.WithDefaults()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: topo.RequestsStream, Subjects: []string{topo.RequestsPrefix + ".>"}, Retention: jetstream.WorkQueuePolicy,
	})
	require.NoError(t, err)
	for range 3 {
		_, err := wire.PublishRequest(ctx, js, topo, schemas.NewRequest("t-doc", "main", "planner"))
		require.NoError(t, err)
	}

	bs := testenv.MarkdownBlocks(t, filepath.Join("..", "..", "docs", "durability.md"))
	ran := 0
	for i, b := range bs {
		switch b.Lang {
		case "sh":
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", b.Text)
			cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "NATS_URL="+n.URL())
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), "docs/durability.md:%d: %s\n%s", b.Line, b.Text, stderr.String())
			require.Less(t, i+1, len(bs), "docs/durability.md:%d: its output block", b.Line)
			require.Equal(t, "text", bs[i+1].Lang)
			require.Equal(t, bs[i+1].Text, stdout.String(), "docs/durability.md:%d: the output shown", b.Line)
			ran++
		case "text":
		default:
			t.Fatalf("docs/durability.md:%d: a %q block no test runs", b.Line, b.Lang)
		}
	}
	require.Equal(t, 1, ran)
	ret, err := consumers.RequestRetention(ctx, js, topo)
	require.NoError(t, err)
	require.Equal(t, jetstream.LimitsPolicy, ret)
}
