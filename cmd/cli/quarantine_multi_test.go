package cli_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every multi-value filter flag takes a comma-separated list and repeated
// flags alike, in ls, replay --all and purge --all.
func TestQuarantineFiltersTakeListsAndRepeatedFlags(t *testing.T) {
	t.Parallel()
	env := newQuarantineEnv(t)
	s := func(tasks ...string) []string {
		var out []string
		for _, task := range tasks {
			out = append(out, fmt.Sprint(env.seqs[task]))
		}
		return out
	}
	for name, c := range map[string]struct {
		args []string
		want []string
	}{
		"PersonasComma":    {[]string{"--reason", "terminal", "--persona", "planner,tester"}, s("p2", "p1", "t-terminal")},
		"PersonasRepeated": {[]string{"--reason", "terminal", "--persona", "planner", "--persona", "tester"}, s("p2", "p1", "t-terminal")},
		"PersonasOnly":     {[]string{"--persona", "planner, nobody"}, s("p2", "p1")},
		"TasksComma":       {[]string{"--task", "p1,t-deferred"}, s("p1", "t-deferred")},
		"TasksRepeated":    {[]string{"--task", "p1", "--task", "p2"}, s("p2", "p1")},
		"ReasonsRepeated":  {[]string{"--reason", "deferred", "--reason", "escalated"}, s("t-escalated", "t-deferred")},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := qrun(t, env.url, append([]string{"quarantine", "ls"}, c.args...)...)
			require.Equal(t, 0, code, errOut)
			require.Equal(t, c.want, tableSeqs(out))
		})
	}
	t.Run("ReplayAndPurgeAll", func(t *testing.T) {
		t.Parallel()
		for _, verb := range []string{"replay", "purge"} {
			code, out, errOut := qrun(t, env.url, "quarantine", verb, "--all", "--reason", "terminal", "--persona", "planner", "--persona", "tester")
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, "3 records would be", verb)
			code, out, errOut = qrun(t, env.url, "quarantine", verb, "--all", "--task", "p1,p2")
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, "2 records would be", verb)
		}
	})
}
