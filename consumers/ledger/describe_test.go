package ledger_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/ledger"
)

// Describe names the server, database and prefix, never the password.
func TestDescribeNamesTheRedisWithoutSecrets(t *testing.T) {
	t.Parallel()
	c, err := ledger.NewClientURL("redis://:s3cret@10.0.0.5:6380/2")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l, err := ledger.New(ledger.Config{Client: c, Prefix: "team-a"})
	require.NoError(t, err)
	require.Equal(t, "redis 10.0.0.5:6380 db 2, key prefix team-a", l.Describe())
	require.NotContains(t, l.Describe(), "s3cret")
}
