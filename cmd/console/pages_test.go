package console_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/wire"
)

func TestOverviewShowsPersonasChartsAndPauses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ids []string
	for i, p := range []string{"echo", "echo", "echo", "flaky", "flaky", "validator", "terminal", "terminal", "plateau", "fixable"} {
		ids = append(ids, e.publish(p, fmt.Sprintf("story-%d", i)))
	}
	e.settle(ids...)
	tab := newTab(t)
	require.NoError(t, chromedp.Do(tab,
		chromedp.Navigate(e.url+"/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-persona="echo"] svg.spark rect.ok`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-persona="flaky"] svg.spark rect.warn`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-persona="terminal"] svg.spark rect.bad`)),
	))
	require.Contains(t, text(t, tab, "#reasons"), "terminal")
	require.Equal(t, "4", text(t, tab, "#quarantine-total"), "terminal ×2, plateau, fixable")
	screenshot(t, tab, "overview")

	login(t, tab, e.url)
	require.NoError(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(`tr[data-persona="echo"] button.pause`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-persona="echo"] .badge.warn`)),
	))
	require.True(t, e.paused("echo"), "the server paused echo's consumer")
	require.NoError(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(`tr[data-persona="echo"] button.resume`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-persona="echo"] button.pause`)),
	))
	require.False(t, e.paused("echo"))
}

func TestQuarantineFilterReplayAndWatchItSucceed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.settle(e.publish("terminal", "story-t1"), e.publish("terminal", "story-t2"), e.publish("fixable", "story-fix"))
	tab := newTab(t)
	login(t, tab, e.url)
	require.NoError(t, chromedp.Do(tab, chromedp.Navigate(e.url+"/quarantine"), chromedp.WaitVisible(chromedp.CSS("#records"))))
	require.Equal(t, "3", text(t, tab, "#match-count"))
	screenshot(t, tab, "quarantine")

	require.NoError(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(`input[name=reason][value=terminal]`)),
		chromedp.SendKeys(chromedp.CSS("#f-persona"), "fixable"),
		chromedp.Click(chromedp.CSS("#f-apply")),
		chromedp.WaitVisible(chromedp.CSS(`#f-persona[value=fixable]`)),
	))
	require.Equal(t, "1", text(t, tab, "#match-count"))
	require.NoError(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(`#records tr[data-seq] td a`)),
		chromedp.WaitVisible(chromedp.CSS("#history")),
	))
	require.Contains(t, text(t, tab, "#payload"), `"persona": "fixable"`)
	require.Contains(t, text(t, tab, "#history"), "the prompt template is broken")
	screenshot(t, tab, "record")

	e.broken.Store(false) // the fix is deployed; now replay
	live := sibling(t, tab)
	require.NoError(t, chromedp.Do(live, chromedp.Navigate(e.url+"/live"), chromedp.WaitVisible(chromedp.CSS("#live-status.ok-text"))))
	require.NoError(t, chromedp.Do(tab, chromedp.Click(chromedp.CSS("#replay-one")), chromedp.WaitVisible(chromedp.CSS("#dry-run-summary"))))
	require.Contains(t, text(t, tab, "#preview"), "-r1", "the dry run names the replay's request id")
	screenshot(t, tab, "replay-dry-run")
	require.NoError(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS("#confirm")),
		chromedp.WaitVisible(chromedp.CSS(`#job[data-state="finished"] a.req`)),
	))
	newID := text(t, tab, "a.req")
	require.NoError(t, chromedp.Do(live, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr.outcome.ok[data-request=%q]`, newID)))))
	require.Contains(t, text(t, live, fmt.Sprintf(`tr.outcome.ok[data-request=%q] td.what`, newID)), "succeeded")
	screenshot(t, live, "live")
	rec, err := wire.NewOutcomes(e.js, wire.Topology{}).Lookup(context.Background(), newID)
	require.NoError(t, err)
	require.Equal(t, "succeeded", string(rec.Outcome))

	// Many by filter: the dry run lists them, the job purges exactly those.
	require.NoError(t, chromedp.Do(tab,
		chromedp.Navigate(e.url+"/quarantine?persona=terminal"),
		chromedp.Click(chromedp.CSS("#purge-all")),
		chromedp.WaitVisible(chromedp.CSS("#dry-run-summary")),
	))
	require.Contains(t, text(t, tab, "#dry-run-summary"), "2 record(s) would be deleted")
	require.NoError(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS("#confirm")),
		chromedp.WaitVisible(chromedp.CSS(`#job[data-state="finished"]`)),
	))
	require.Contains(t, text(t, tab, "#job-counts"), "ok 2")
	require.NoError(t, chromedp.Do(tab, chromedp.Navigate(e.url+"/quarantine"), chromedp.WaitVisible(chromedp.CSS("#records"))))
	require.Equal(t, "0", text(t, tab, "#match-count"), "the replayed record was removed, the purged ones deleted")
}

func TestTaskPageShowsThePlateau(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.publish("plateau", "story-plateau")
	e.settle(id)
	tab := newTab(t)
	for _, q := range []string{id, "story-plateau"} {
		require.NoError(t, chromedp.Do(tab,
			chromedp.Navigate(e.url+"/task?q="+q),
			chromedp.WaitVisible(chromedp.CSS(`svg.progress-chart[data-plateau="true"]`)),
		))
		require.Contains(t, text(t, tab, ".plateau-label"), "plateau at 5/9")
		require.Contains(t, text(t, tab, "section.step .record"), "deferred")
		require.Contains(t, text(t, tab, "section.step .record"), "4800/1200 tokens in/out, $0.018", "the demo persona's usage, summed")
		require.Contains(t, text(t, tab, "table.attempts"), "1200/300 · $0.0045")
		require.Equal(t, "story-plateau", text(t, tab, "#task-id"))
	}
	rows, err := chromedp.Run(tab, chromedp.Nodes(chromedp.CSSAll("table.attempts tr.class-retryable")))
	require.NoError(t, err)
	require.Len(t, rows, 4, "four attempts at 5/9: adaptive retry confirms the plateau with the other agent on attempt 4, then defers")
	screenshot(t, tab, "task-plateau")
}
