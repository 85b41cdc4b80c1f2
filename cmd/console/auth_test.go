package console_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// noRedirect keeps a 303 visible to the test.
func noRedirect(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func post(t *testing.T, c *http.Client, target string, form url.Values, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// csrfOf visits the console once and returns the CSRF cookie it set.
func csrfOf(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	resp, err := c.Get(base + "/login")
	require.NoError(t, err)
	resp.Body.Close()
	u, _ := url.Parse(base)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "pq_csrf" {
			return ck.Value
		}
	}
	t.Fatal("no CSRF cookie")
	return ""
}

func TestMutationsNeedTheTokenAndCSRF(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pause := e.url + "/personas/echo/pause"
	jar, _ := cookiejar.New(nil)
	c := noRedirect(jar)
	csrf := csrfOf(t, c, e.url)

	for name, tc := range map[string]struct {
		form   url.Values
		header map[string]string
	}{
		"NoTokenNoCSRF":       {},
		"CSRFButNotLoggedIn":  {form: url.Values{"csrf": {csrf}}},
		"WrongBearer":         {header: map[string]string{"Authorization": "Bearer not-the-token-at-all"}},
		"BearerFromElsewhere": {header: map[string]string{"Authorization": "Bearer " + testToken, "Origin": "http://evil.example"}},
	} {
		code, body := post(t, c, pause, tc.form, tc.header)
		require.Equal(t, http.StatusForbidden, code, name)
		require.Contains(t, body, "needs the console token", name)
	}
	code, _ := post(t, c, e.url+"/login", url.Values{"csrf": {csrf}, "token": {"wrong-token-0123456789"}}, nil)
	require.Equal(t, http.StatusForbidden, code, "a wrong token does not log in")
	code, _ = post(t, c, e.url+"/login", url.Values{"token": {testToken}}, nil)
	require.Equal(t, http.StatusForbidden, code, "a login without the CSRF token is refused")
	require.False(t, e.paused("echo"), "nothing refused changed anything")

	code, _ = post(t, c, e.url+"/login", url.Values{"csrf": {csrf}, "token": {testToken}}, nil)
	require.Equal(t, http.StatusSeeOther, code)
	code, _ = post(t, c, pause, url.Values{}, nil)
	require.Equal(t, http.StatusForbidden, code, "logged in, but no CSRF field")
	code, _ = post(t, c, pause, url.Values{"csrf": {csrf}}, nil)
	require.Equal(t, http.StatusSeeOther, code)
	require.True(t, e.paused("echo"))
	code, _ = post(t, noRedirect(nil), e.url+"/personas/echo/resume", nil, map[string]string{"Authorization": "Bearer " + testToken})
	require.Equal(t, http.StatusSeeOther, code, "a script may use the bearer token")
	require.False(t, e.paused("echo"))
}

func TestReadOnlyHidesAndRefusesActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ro := e.startConsole(true)
	resp, err := http.Get(ro + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), "read-only")
	require.NotContains(t, string(body), "button class=\"pause\"")
	code, body2 := post(t, noRedirect(nil), ro+"/personas/echo/pause", nil, map[string]string{"Authorization": "Bearer " + testToken})
	require.Equal(t, http.StatusForbidden, code)
	require.Contains(t, body2, "read-only")
}

func TestBrowserMutationWithoutTokenIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tab := newTab(t)
	require.NoError(t, chromedp.Do(tab,
		chromedp.Navigate(e.url+"/"),
		chromedp.Click(chromedp.CSS(`tr[data-persona="echo"] button.pause`)),
		chromedp.WaitVisible(chromedp.CSS("#error-message")),
	))
	require.Contains(t, text(t, tab, "#error-message"), "needs the console token")
	require.Contains(t, text(t, tab, "h1"), "403")
	status, err := chromedp.Run(tab, chromedp.Evaluate[float64](`fetch("/personas/echo/pause", {method: "POST"}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	require.Equal(t, float64(http.StatusForbidden), status, "a script in the page without the token is refused too")
	require.False(t, e.paused("echo"))
}
