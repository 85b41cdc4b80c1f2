package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

// The console's replay dry run shows the step deadline each replay will
// carry: a fresh step budget, not the original deadline that has passed.
func TestReplayPreviewShowsTheDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	req := schemas.NewRequest("story-43", "review", "fixable")
	_, err := wire.PublishRequest(context.Background(), e.js, wire.Topology{}, req,
		wire.WithDeadline(req.CreatedAt.Add(7*time.Minute+30*time.Second)))
	require.NoError(t, err)
	e.settle(req.RequestID)
	ev, err := wire.NewOutcomes(e.js, wire.Topology{}).Lookup(context.Background(), req.RequestID)
	require.NoError(t, err)

	form := url.Values{"kind": {"replay"}, "seq": {fmt.Sprint(ev.QuarantineSeq)}}
	r, err := http.NewRequest(http.MethodPost, e.url+"/quarantine/plan", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := noRedirect(nil).Do(r)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	page, err := http.Get(e.url + resp.Header.Get("Location"))
	require.NoError(t, err)
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	require.Contains(t, string(body), "fresh step budget of 7m30s (the original&#39;s), from the replay")
}
