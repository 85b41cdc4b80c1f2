package cli_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCapacity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		code     int
		replicas int
		clusters int
		errText  string
	}{
		{"TenPerSecond", []string{"--rps", "10", "--persona-time", "30s", "--retry-rate", "0.2", "--output-size", "4096"}, 0, 8, 1, ""},
		{"ThousandPerSecond", []string{"--rps", "1000", "--persona-time", "30s", "--retry-rate", "0.2", "--output-size", "4096"}, 0, 782, 1, ""},
		{"MissingRate", []string{"--persona-time", "30s"}, 1, 0, 0, "invalid workload: rps: must be a positive number"},
		{"BadRetryRate", []string{"--rps", "1", "--persona-time", "1s", "--retry-rate", "-1"}, 1, 0, 0, "retry_rate: must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := run(t, context.Background(), append([]string{"capacity", "-o", "json"}, tt.args...)...)
			require.Equal(t, tt.code, code, errOut)
			if tt.code != 0 {
				require.Contains(t, errOut, tt.errText)
				return
			}
			var p struct {
				Replicas     int `json:"replicas"`
				NATSClusters int `json:"nats_clusters"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &p), out)
			require.Equal(t, tt.replicas, p.Replicas)
			require.Equal(t, tt.clusters, p.NATSClusters)
		})
	}
	code, out, errOut := run(t, context.Background(), "capacity", "--rps", "10", "--persona-time", "30s")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "replicas")
	require.Contains(t, out, "per million requests/day")
}
