package retry_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

func TestClassRoundTrip(t *testing.T) {
	t.Parallel()
	for c := retry.ClassSucceeded; c <= retry.ClassInvalidMessage; c++ {
		t.Run(c.String(), func(t *testing.T) {
			t.Parallel()
			got, err := retry.ParseClass(c.String())
			require.NoError(t, err)
			require.Equal(t, c, got)
		})
	}
	_, err := retry.ParseClass("exploded")
	require.ErrorIs(t, err, retry.ErrInvalidPolicy)
	require.Equal(t, "class(42)", retry.Class(42).String())
}

func TestClassFailed(t *testing.T) {
	t.Parallel()
	require.False(t, retry.ClassSucceeded.Failed())
	require.False(t, retry.ClassSnooze.Failed())
	require.True(t, retry.ClassNetwork.Failed())
	require.True(t, retry.ClassInvalidMessage.Failed())
}

func TestRoleFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		hasFallback bool
		want        []retry.Role
	}{
		{"Alternates", true, []retry.Role{"primary", "fallback", "primary", "fallback", "primary"}},
		{"PrimaryOnly", false, []retry.Role{"primary", "primary", "primary", "primary", "primary"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := make([]retry.Role, 5)
			for i := range got {
				got[i] = retry.RoleFor(i+1, tt.hasFallback)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestActionString(t *testing.T) {
	t.Parallel()
	names := []string{}
	for a := retry.ActionAck; a <= retry.ActionEscalate+1; a++ {
		names = append(names, a.String())
	}
	require.Equal(t, []string{"ack", "retry", "quarantine", "defer", "escalate", "action(5)"}, names)
}
