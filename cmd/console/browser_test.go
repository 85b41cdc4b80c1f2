package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// The browser tests drive a real headless Chromium (Debian's chromium
// package) with chromedp. Without one they skip, but fail when CI is set.

var browser struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	err    error // starting it failed
}

// browserStart bounds Chromium's start: a browser that never answers fails
// the tests that need it instead of hanging the package until its timeout.
const browserStart = time.Minute

// stopBrowser ends the shared Chromium once every test has run (TestMain,
// main_test.go).
func stopBrowser() {
	if browser.cancel != nil {
		browser.cancel()
	}
}

func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// newTab opens a tab in a fresh browser context (its own cookies), closed
// when the test ends.
func newTab(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no chromium on PATH (apt-get install chromium); CI is set, so this is a failure, not a skip")
		}
		t.Skip("no chromium on PATH: browser tests skipped (apt-get install chromium)")
	}
	browser.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
			chromedp.WindowSize(1280, 860), chromedp.Flag("hide-scrollbars", true))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(alloc)
		browser.ctx, browser.cancel = ctx, func() { cancel(); cancelAlloc() }
		// Started once, here, by one goroutine: the first Run on a context
		// allocates the browser, and parallel first Runs must not race it.
		started := make(chan error, 1)
		go func() { started <- chromedp.Do(ctx) }()
		select {
		case browser.err = <-started:
		case <-time.After(browserStart):
			browser.err = fmt.Errorf("chromium %s did not start within %s", path, browserStart)
		}
	})
	require.NoError(t, browser.err, "start chromium")
	tab, cancel := chromedp.NewContext(browser.ctx, chromedp.WithNewBrowserContext())
	tab, cancelTimeout := context.WithTimeout(tab, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel() })
	return tab
}

// sibling opens another tab in the same browser context (same cookies).
func sibling(t *testing.T, tab context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(tab)
	t.Cleanup(cancel)
	return ctx
}

// screenshot saves the page as name.png: into testdata/screenshots (shown
// in docs/console.md) when PERSONAQ_SCREENSHOTS is set (make screenshots), else into
// the test's temporary directory.
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	require.NoError(t, err, "screenshot %s", name)
	dir := t.TempDir()
	if os.Getenv("PERSONAQ_SCREENSHOTS") != "" {
		dir = filepath.Join("testdata", "screenshots")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

// login logs the tab in with the console token.
func login(t *testing.T, tab context.Context, url string) {
	t.Helper()
	require.NoError(t, chromedp.Do(tab,
		chromedp.Navigate(url+"/login"),
		chromedp.SendKeys(chromedp.CSS("#token"), testToken),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#logout")),
	))
}

func text(t *testing.T, tab context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(tab, chromedp.TextContent(chromedp.CSS(sel)))
	require.NoError(t, err, "text of %s", sel)
	return s
}
