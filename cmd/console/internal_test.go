package console

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

func attempts(progress ...int) []retry.Attempt {
	out := make([]retry.Attempt, len(progress))
	for i, p := range progress {
		out[i] = retry.Attempt{Number: i + 1, Role: retry.RoleFor(i+1, true), Class: retry.ClassRetryable}
		if p >= 0 {
			out[i].Progress = retry.Progress{Completed: p, Total: 9}
		}
	}
	return out
}

func TestProgressChartMarksThePlateau(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		progress []int
		want     string
	}{
		"FlatAcrossAgents":    {[]int{5, 5, 5}, "plateau at 5/9 over attempts 1–3"},
		"FlatAfterProgress":   {[]int{1, 5, 5}, "plateau at 5/9 over attempts 2–3"},
		"Progressing":         {[]int{1, 3, 6}, ""},
		"UnknownProgressSkip": {[]int{4, -1, 4}, "plateau at 4/9 over attempts 1–3"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newProgressChart(attempts(tc.progress...))
			require.NotNil(t, c)
			if tc.want == "" {
				require.Nil(t, c.Plateau)
				return
			}
			require.NotNil(t, c.Plateau)
			require.Equal(t, tc.want, c.Plateau.Text)
		})
	}
	require.Nil(t, newProgressChart(attempts(-1, -1)), "no progress reported: no chart")
}

func TestPageOfIsNewestFirst(t *testing.T) {
	t.Parallel()
	seqs := make([]uint64, 120)
	for i := range seqs {
		seqs[i] = uint64(i + 1)
	}
	p1 := pageOf(seqs, 1, 50)
	require.Len(t, p1, 50)
	require.Equal(t, []uint64{120, 71}, []uint64{p1[0], p1[49]})
	require.Equal(t, []uint64{20, 1}, []uint64{pageOf(seqs, 3, 50)[0], pageOf(seqs, 3, 50)[19]})
	require.Empty(t, pageOf(seqs, 4, 50))
}

func TestLocalPathKeepsRedirectsOnSite(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/quarantine": "/quarantine", "": "/", "//evil.example": "/", `/\evil.example`: "/",
		"https://evil.example": "/", "quarantine": "/",
	} {
		require.Equal(t, want, localPath(in), in)
	}
}

func TestCountsKeepTheWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 12, 30, 30, 0, time.UTC)
	c := newCounts(time.Hour, func() time.Time { return now })
	c.add(liveEvent{Kind: "outcome", Persona: "p", At: now.Add(-time.Minute)})
	c.add(liveEvent{Kind: "outcome", Persona: "p", At: now, stopped: true})
	c.add(liveEvent{Kind: "attempt", Persona: "p", At: now, retry: true})
	c.add(liveEvent{Kind: "attempt", Persona: "p", At: now})                     // started: not counted
	c.add(liveEvent{Kind: "outcome", Persona: "p", At: now.Add(-2 * time.Hour)}) // out of the window
	s := c.series("p")
	require.Len(t, s, 60)
	require.Equal(t, minute{ok: 1}, s[58])
	require.Equal(t, minute{stopped: 1, retries: 1}, s[59])
	require.Equal(t, hourStats{Succeeded: 1, Stopped: 1, Retries: 1}, sum(s))
}

func TestRingResumesWithoutAGap(t *testing.T) {
	t.Parallel()
	r := newRing(3)
	for range 5 {
		r.add(liveEvent{Kind: "outcome"})
	}
	backlog, ch := r.subscribe(3)
	defer r.unsubscribe(ch)
	require.Equal(t, []uint64{4, 5}, []uint64{backlog[0].ID, backlog[1].ID})
	r.add(liveEvent{Kind: "attempt"})
	require.Equal(t, uint64(6), (<-ch).ID)
	recent, last := r.recent(2)
	require.Equal(t, uint64(6), last)
	require.Equal(t, []uint64{6, 5}, []uint64{recent[0].ID, recent[1].ID})
}
