package console_test

import (
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/integration/testenv"
)

// getPage returns the body of a console page.
func getPage(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// The task page names the ledger it reads; reading another ledger than the
// replicas write, it shows the task's terminal records from NATS ("ran;
// attempts recorded in another ledger") instead of "never run".
func TestTaskPageNamesItsLedgerAndFallsBackOnTerminalRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.publish("echo", "story-echo")
	e.settle(id)

	body := getPage(t, e.url+"/task?q=story-echo")
	require.Contains(t, body, `id="ledger">ledger: redis `)
	require.Contains(t, body, `class="attempts"`, "the ledger the replicas write has the attempts")

	other, err := ledger.New(ledger.Config{Client: testenv.StartRedis(t).Client(t)})
	require.NoError(t, err)
	e.led = other
	elsewhere := e.startConsole(true)
	for _, q := range []string{"story-echo", id} {
		body = getPage(t, elsewhere+"/task?q="+url.QueryEscape(q))
		require.Contains(t, body, "ran; attempts recorded in another ledger", q)
		require.Contains(t, body, "succeeded</span> after 1 attempt(s)", q)
		require.NotContains(t, body, "never run", q)
	}
}
