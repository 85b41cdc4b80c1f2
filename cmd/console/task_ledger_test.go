package console_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

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

	// The terminal record is stored before the ledger's finish is written:
	// the page may show the attempt running for a moment.
	var body string
	require.Eventually(t, func() bool {
		body = getPage(t, e.url+"/task?q=story-echo")
		return strings.Contains(body, `class="attempts"`)
	}, 10*time.Second, 20*time.Millisecond, "the ledger the replicas write has the attempts")
	require.Contains(t, body, `id="ledger">ledger: redis `)

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
