package console_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestTaskPageShowsLiveOutput: the task page of a running request shows
// what its persona has written so far, then the rest as it is written, in
// a real browser; the stream ends with the request.
func TestTaskPageShowsLiveOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.publish("typist", "story-live")
	tab := newTab(t)
	select { // running, so the ledger knows its step and the page shows it
	case <-e.typing:
	case <-time.After(time.Minute):
		t.Fatal("the typist persona never ran")
	}
	require.NoError(t, chromedp.Do(tab,
		chromedp.Navigate(e.url+"/task?q="+id),
		chromedp.WaitVisible(chromedp.CSS(`pre.live-output`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("pre.live-output").textContent === "Reading the code. "`),
	), "the first half, while the persona still works")
	close(e.typed)
	require.NoError(t, chromedp.Do(tab,
		chromedp.Poll[chromedp.Void](`document.querySelector("pre.live-output").dataset.ended === "true"`),
	), "the stream ends with the request")
	require.Equal(t, "Reading the code. The change is sound.", text(t, tab, "pre.live-output"))
	screenshot(t, tab, "task-live-output")
	e.settle(id)
}
