package handlers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/personaq/personaq/retry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// CommitError stands in for a git commit error, matched by simple name.
type CommitError struct{ msg string }

func (e *CommitError) Error() string { return e.msg }

// refusedAddr returns a loopback address whose port is bound but not
// listening, so a connection to it is refused until the test ends. A port
// whose listener was merely closed could be taken meanwhile by another test
// process running in parallel (seen: a dial that was to be refused
// connected).
func refusedAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

func TestClassify(t *testing.T) {
	t.Parallel()
	_, dialErr := net.Dial("tcp", refusedAddr(t))
	require.Error(t, dialErr)
	cause := errors.New("boom")

	tests := []struct {
		name       string
		err        error
		class      retry.Class
		retryAfter time.Duration
		feedback   string
	}{
		{"Nil", nil, retry.ClassSucceeded, 0, ""},
		{"Terminal", Terminal(cause), retry.ClassTerminal, 0, ""},
		{"TerminalNilCause", Terminal(nil), retry.ClassTerminal, 0, ""},
		{"Retryable", Retryable(cause), retry.ClassRetryable, 0, ""},
		{"After", After(7*time.Second, cause), retry.ClassRetryable, 7 * time.Second, ""},
		{"Network", Network(cause), retry.ClassNetwork, 0, ""},
		{"Timeout", Timeout(cause), retry.ClassTimeout, 0, ""},
		{"Validation", Validation("add a summary", cause), retry.ClassValidation, 0, "add a summary"},
		{"ValidationWithoutFeedback", Validation("", cause), retry.ClassValidation, 0, "boom"},
		{"Snooze", Snooze(time.Minute), retry.ClassSnooze, time.Minute, ""},
		{"WrappedWithErrorf", fmt.Errorf("step plan: %w", After(time.Second, cause)), retry.ClassRetryable, time.Second, ""},
		{"Joined", errors.Join(cause, Terminal(&CommitError{"nothing to commit"})), retry.ClassTerminal, 0, ""},
		{"OutermostClassWins", Retryable(Terminal(cause)), retry.ClassRetryable, 0, ""},
		{"ClassBeatsCause", Terminal(context.DeadlineExceeded), retry.ClassTerminal, 0, ""},
		{"DeadlineExceeded", context.DeadlineExceeded, retry.ClassTimeout, 0, ""},
		{"WrappedDeadline", fmt.Errorf("call: %w", context.DeadlineExceeded), retry.ClassTimeout, 0, ""},
		{"RefusedDial", dialErr, retry.ClassNetwork, 0, ""},
		{"ConnectionReset", fmt.Errorf("read: %w", syscall.ECONNRESET), retry.ClassNetwork, 0, ""},
		{"DNSError", &net.DNSError{Err: "no such host", Name: "agent.invalid", IsNotFound: true}, retry.ClassNetwork, 0, ""},
		{"Unknown", cause, retry.ClassRetryable, 0, ""},
		{"UnclassifiedCustomType", &CommitError{"nothing to commit"}, retry.ClassRetryable, 0, ""},
		{"Panic", fmt.Errorf("%w: index out of range", ErrPanic), retry.ClassTerminal, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Classify(tt.err)
			require.Equal(t, tt.class, c.Class, "class of %v", tt.err)
			require.Equal(t, tt.retryAfter, c.RetryAfter)
			require.Equal(t, tt.feedback, c.Feedback)
		})
	}
}

func TestTypeNames(t *testing.T) {
	t.Parallel()
	commit := &CommitError{"nothing to commit"}
	tests := []struct {
		name string
		err  error
		want []string
	}{
		{"Nil", nil, nil},
		{"PlainErrorsHaveNoName", errors.New("x"), nil},
		{"CustomType", commit, []string{"CommitError"}},
		{"WrappedWithErrorf", fmt.Errorf("commit: %w", commit), []string{"CommitError"}},
		{"ClassifiedIsTransparent", Terminal(fmt.Errorf("commit: %w", commit)), []string{"CommitError"}},
		{"Joined", errors.Join(commit, &StatusError{Code: 429}), []string{"CommitError", "RateLimitError"}},
		{"TypedNamesItself", fmt.Errorf("llm: %w", &StatusError{Code: 400}), []string{"BadRequestError"}},
		{"FromStatus", FromStatus(401, "", "", time.Time{}), []string{"AuthenticationError"}},
		{"DNSError", &net.DNSError{Err: "no such host"}, []string{"DNSError"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, TypeNames(tt.err))
			if tt.err != nil {
				require.Equal(t, tt.want, Classify(tt.err).TypeNames)
			}
		})
	}
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"KeepsCauseText", Terminal(errors.New("bad prompt")), "bad prompt"},
		{"NilCauseNamesClass", Terminal(nil), "terminal"},
		{"Snooze", Snooze(90 * time.Second), "snoozed for 1m30s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.EqualError(t, tt.err, tt.want)
		})
	}
}

func TestClassifiedErrorsUnwrap(t *testing.T) {
	t.Parallel()
	commit := &CommitError{"nothing to commit"}
	for name, err := range map[string]error{
		"Terminal":   Terminal(commit),
		"Retryable":  Retryable(commit),
		"After":      After(time.Second, commit),
		"Network":    Network(commit),
		"Timeout":    Timeout(commit),
		"Validation": Validation("fb", commit),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var got *CommitError
			require.ErrorAs(t, err, &got)
			require.Same(t, commit, got)
		})
	}
}
