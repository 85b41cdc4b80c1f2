package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

// The task page cancels a running request after a confirmation: the
// request ends cancelled, by "console", with the reason typed.
func TestTaskPageCancelsARunningRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.publish("hang", "story-cancel")
	tab := newTab(t)
	login(t, tab, e.url)
	require.Eventually(t, func() bool {
		err := chromedp.Do(tab, chromedp.Navigate(e.url+"/task?q=story-cancel"), chromedp.WaitReady(chromedp.CSS("body")))
		if err != nil {
			return false
		}
		// AtLeast(0): a page loaded before the button was there answers
		// now, and the next round loads it again (the default waits for a
		// node on this page for ever).
		nodes, err := chromedp.Run(tab, chromedp.Nodes(chromedp.CSSAll(".cancel-request"), chromedp.AtLeast(0)))
		return err == nil && len(nodes) == 1
	}, 20*time.Second, 200*time.Millisecond, "the running request's step with its cancel button")
	require.NoError(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(".cancel-request")),
		chromedp.WaitVisible(chromedp.CSS("#cancel-confirm")),
	))
	require.Contains(t, text(t, tab, "#cancel-what"), id, "the confirmation names the request")
	rec, err := e.client.Record(context.Background(), id)
	require.Error(t, err, "nothing is cancelled before the confirmation: %v", rec)
	screenshot(t, tab, "cancel-confirm")
	require.NoError(t, chromedp.Do(tab,
		chromedp.SendKeys(chromedp.CSS("#cancel-reason"), "superseded by a new plan"),
		chromedp.Click(chromedp.CSS("#cancel-confirm")),
		chromedp.WaitVisible(chromedp.CSS("#task-id")),
	))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = e.client.Await(ctx, id)
	rec, err = e.client.Record(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, schemas.OutcomeCancelled, rec.Outcome)
	require.Equal(t, "console", rec.CancelledBy)
	require.Equal(t, "superseded by a new plan", rec.Detail)
}

// The task page's task-level button cancels every open request of the
// task after a confirmation.
func TestTaskPageCancelsTheTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := []string{e.publish("hang", "story-cancel-all"), e.publish("hang", "story-cancel-all")}
	tab := newTab(t)
	login(t, tab, e.url)
	require.Eventually(t, func() bool {
		err := chromedp.Do(tab, chromedp.Navigate(e.url+"/task?q=story-cancel-all"), chromedp.WaitReady(chromedp.CSS("body")))
		if err != nil {
			return false
		}
		// AtLeast(0): a page loaded before the button was there answers
		// now, and the next round loads it again (the default waits for a
		// node on this page for ever).
		nodes, err := chromedp.Run(tab, chromedp.Nodes(chromedp.CSSAll(".cancel-request"), chromedp.AtLeast(0)))
		return err == nil && len(nodes) == 2
	}, 20*time.Second, 200*time.Millisecond, "both running steps")
	require.NoError(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS("#cancel-task")),
		chromedp.WaitVisible(chromedp.CSS("#cancel-confirm")),
	))
	require.Contains(t, text(t, tab, "#cancel-what"), "story-cancel-all")
	require.NoError(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS("#cancel-confirm")),
		chromedp.WaitVisible(chromedp.CSS("#task-id")),
	))
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _ = e.client.Await(ctx, id)
		cancel()
		rec, err := e.client.Record(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, schemas.OutcomeCancelled, rec.Outcome)
		require.Equal(t, "console", rec.CancelledBy)
	}
}
