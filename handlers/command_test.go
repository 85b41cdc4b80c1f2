//go:build unix

package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

// shInvoker runs script with /bin/sh -c; extra args become $1, $2, ….
// Running the shell instead of writing executable scripts avoids ETXTBSY
// when parallel tests fork while another test still has a script open.
func shInvoker(t *testing.T, script string, cfg CommandConfig, args ...string) *CommandInvoker {
	t.Helper()
	cfg.Path = "/bin/sh"
	cfg.Args = append([]string{"-c", script, "sh"}, args...)
	inv, err := NewCommand(cfg)
	require.NoError(t, err)
	return inv
}

func TestCommandInvokerExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		script   string
		codes    map[int]retry.Class
		class    retry.Class
		feedback string
		text     string
	}{
		{name: "Success", script: "exit 0", class: retry.ClassSucceeded},
		{name: "DataErrIsValidation", script: "echo 'summary missing' >&2; exit 65", class: retry.ClassValidation,
			feedback: "summary missing", text: "persona command sh: exit status 65: summary missing"},
		{name: "ValidationWithoutStderr", script: "exit 65", class: retry.ClassValidation,
			feedback: "persona command sh: exit status 65", text: "persona command sh: exit status 65"},
		{name: "UnavailableIsNetwork", script: "exit 69", class: retry.ClassNetwork, text: "persona command sh: exit status 69"},
		{name: "TempFailIsRetryable", script: "echo 'try later' >&2; exit 75", class: retry.ClassRetryable,
			text: "persona command sh: exit status 75: try later"},
		{name: "OtherIsTerminal", script: "echo 'no such model' >&2; exit 1", class: retry.ClassTerminal,
			text: "persona command sh: exit status 1: no such model"},
		{name: "ConfiguredCode", script: "exit 124", codes: map[int]retry.Class{124: retry.ClassTimeout},
			class: retry.ClassTimeout, text: "persona command sh: exit status 124"},
		{name: "OverriddenDefault", script: "exit 75", codes: map[int]retry.Class{75: retry.ClassTerminal},
			class: retry.ClassTerminal, text: "persona command sh: exit status 75"},
		{name: "DefaultsKeptBesideOverrides", script: "exit 65", codes: map[int]retry.Class{75: retry.ClassTerminal},
			class: retry.ClassValidation, feedback: "persona command sh: exit status 65", text: "persona command sh: exit status 65"},
		{name: "KilledBySignal", script: "kill -KILL $$", class: retry.ClassRetryable,
			text: "persona command sh: terminated by signal 9 (killed)"},
		// A wrapper script reports its child's death by a signal as 128 +
		// the signal; so does an agent that traps SIGTERM to clean up.
		{name: "ChildKilledBySIGKILL", script: "sh -c 'kill -KILL $$'", class: retry.ClassRetryable,
			text: "persona command sh: exit status 137: Killed"},
		{name: "TrappedSIGTERM", script: "trap 'exit 143' TERM; kill -TERM $$; sleep 5", class: retry.ClassRetryable,
			text: "persona command sh: exit status 143"},
		{name: "SignalCodesConfigurable", script: "exit 137", codes: map[int]retry.Class{137: retry.ClassTerminal},
			class: retry.ClassTerminal, text: "persona command sh: exit status 137"},
		// A session that ran, reported progress and failed (wrong output,
		// tests failed) is adaptive-retry material, not terminal...
		{name: "FailedAfterProgressIsRetried", script: `echo '{"progress":{"completed":5,"total":9}}'; echo 'tests failed' >&2; exit 1`,
			class: retry.ClassRetryable, text: "persona command sh: exit status 1: tests failed"},
		// ...unless the exit code is configured terminal.
		{name: "ConfiguredTerminalAfterProgress", script: `echo '{"progress":{"completed":5,"total":9}}'; exit 1`,
			codes: map[int]retry.Class{1: retry.ClassTerminal}, class: retry.ClassTerminal, text: "persona command sh: exit status 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv := shInvoker(t, tt.script, CommandConfig{ExitCodes: tt.codes})
			_, err := inv.Handle(t.Context(), testRequest())
			c := Classify(err)
			require.Equal(t, tt.class, c.Class, "error: %v", err)
			require.Equal(t, tt.feedback, c.Feedback)
			if tt.class == retry.ClassSucceeded {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.text)
			require.Equal(t, []string{"ExitError"}, c.TypeNames)
		})
	}
}

func TestCommandInvokerGetsEnvelopeOnStdin(t *testing.T) {
	t.Parallel()
	inv := shInvoker(t, "cat", CommandConfig{})
	res, err := inv.Handle(t.Context(), testRequest())
	require.NoError(t, err)
	var got Envelope
	require.NoError(t, json.Unmarshal(res.Output, &got))
	require.Empty(t, cmp.Diff(NewEnvelope(testRequest()), got))
}

func TestCommandInvokerEnvironment(t *testing.T) {
	t.Parallel()
	inv := shInvoker(t, "env | grep -E '^(PERSONAQ_|EXTRA=)' | sort", CommandConfig{
		Env: []string{"EXTRA=1", "PERSONAQ_ATTEMPT=99"},
	})
	res, err := inv.Handle(t.Context(), testRequest())
	require.NoError(t, err)
	var out string
	require.NoError(t, json.Unmarshal(res.Output, &out))
	want := []string{
		"EXTRA=1",
		"PERSONAQ_AGENT=codex",
		"PERSONAQ_ATTEMPT=2",
		"PERSONAQ_CORRELATION_ID=corr-1",
		"PERSONAQ_IDEMPOTENCY_KEY=task-7/plan/2",
		"PERSONAQ_PERSONA=planner",
		"PERSONAQ_PROGRESS_INTERVAL_MS=60000",
		"PERSONAQ_REQUEST_ID=req-1",
		"PERSONAQ_ROLE=fallback",
		"PERSONAQ_STEP=plan",
		"PERSONAQ_TASK_ID=task-7",
	}
	require.Equal(t, want, strings.Split(out, "\n"))
}

func TestCommandInvokerProgress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		script   string
		class    retry.Class
		progress retry.Progress
		output   string
	}{
		{name: "LastReportWinsAndLeavesOutput",
			script: `echo '{"progress":{"completed":1,"total":9}}'; echo '{"progress":{"completed":5,"total":9}}'; echo '{"plan":"ok"}'`,
			class:  retry.ClassSucceeded, progress: retry.Progress{Completed: 5, Total: 9}, output: `{"plan":"ok"}`},
		{name: "KeptOnFailure",
			script: `echo '{"progress":{"completed":5,"total":9}}'; exit 75`,
			class:  retry.ClassRetryable, progress: retry.Progress{Completed: 5, Total: 9}},
		{name: "ResultCarryingProgressStaysOutput",
			script: `echo '{"plan":"ok","progress":{"completed":9,"total":9}}'`,
			class:  retry.ClassSucceeded, progress: retry.Progress{Completed: 9, Total: 9},
			output: `{"plan":"ok","progress":{"completed":9,"total":9}}`},
		{name: "OtherLinesIgnored",
			script: `echo 'thinking…'; echo '{"progress":{"completed":3,"total":9}}'; echo '[1,2]'`,
			class:  retry.ClassSucceeded, progress: retry.Progress{Completed: 3, Total: 9}, output: `"thinking…\n[1,2]"`},
		{name: "ImpossibleReportIgnored",
			script: `echo '{"progress":{"completed":3,"total":9}}'; echo '{"progress":{"completed":10,"total":9}}'`,
			class:  retry.ClassSucceeded, progress: retry.Progress{Completed: 3, Total: 9},
			output: `{"progress":{"completed":10,"total":9}}`},
		{name: "LastLineWithoutNewline",
			script: `printf '{"progress":{"completed":2,"total":4}}'`,
			class:  retry.ClassSucceeded, progress: retry.Progress{Completed: 2, Total: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := shInvoker(t, tt.script, CommandConfig{}).Handle(t.Context(), testRequest())
			require.Equal(t, tt.class, Classify(err).Class, "error: %v", err)
			require.Equal(t, tt.progress, res.Progress)
			if tt.output == "" {
				require.Empty(t, res.Output)
			} else {
				require.JSONEq(t, tt.output, string(res.Output))
			}
		})
	}
}

func TestCommandInvokerStderrTail(t *testing.T) {
	t.Parallel()
	const tail = 64
	script := `i=0; while [ $i -lt 200 ]; do echo "noise line $i" >&2; i=$((i+1)); done; echo 'the real reason' >&2; exit 1`
	_, err := shInvoker(t, script, CommandConfig{StderrTail: tail}).Handle(t.Context(), testRequest())
	var ee *ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 1, ee.Code)
	require.True(t, strings.HasSuffix(ee.Stderr, "the real reason"), ee.Stderr)
	require.True(t, strings.HasPrefix(ee.Stderr, "…"), ee.Stderr)
	require.LessOrEqual(t, len(ee.Stderr), tail+len("…"))
}

func TestCommandInvokerOutputLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
		class  retry.Class
		isBig  bool
	}{
		{"AtLimit", "printf 12345678", retry.ClassSucceeded, false},
		{"OverLimit", "printf 123456789", retry.ClassTerminal, true},
		{"ExitCodeWins", "printf 123456789; exit 75", retry.ClassRetryable, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := shInvoker(t, tt.script, CommandConfig{MaxOutputBytes: 8}).Handle(t.Context(), testRequest())
			require.Equal(t, tt.class, Classify(err).Class, "error: %v", err)
			require.Equal(t, tt.isBig, errors.Is(err, ErrResponseTooLarge))
		})
	}
}

// readPID waits for the script to write a pid to path.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 5*time.Millisecond)
	return pid
}

// processGone reports whether pid has exited; a zombie counts, as its
// reaper (not us) will collect it.
func processGone(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	rest := stat[bytes.LastIndexByte(stat, ')')+1:]
	return len(rest) > 1 && rest[1] == 'Z'
}

// spawnChild writes the pid of a background `sleep 30` to $1, then waits.
const spawnChild = `sleep 30 & echo $! > "$1.tmp" && mv "$1.tmp" "$1"; wait`

func TestCommandInvokerStopKillsProcessGroup(t *testing.T) {
	t.Parallel()
	errShutdown := errors.New("shutting down")
	tests := []struct {
		name   string
		script string
		cause  error
		class  retry.Class
	}{
		{"DeadlineIsTimeout", spawnChild, context.DeadlineExceeded, retry.ClassTimeout},
		{"IgnoredSIGTERMGetsSIGKILL", "trap '' TERM; " + spawnChild, context.DeadlineExceeded, retry.ClassTimeout},
		{"ShutdownIsNotATimeout", spawnChild, errShutdown, retry.ClassRetryable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pidFile := filepath.Join(t.TempDir(), "child.pid")
			inv := shInvoker(t, tt.script, CommandConfig{KillGrace: 100 * time.Millisecond}, pidFile)
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			type outcome struct{ err error }
			done := make(chan outcome, 1)
			go func() {
				_, err := inv.Handle(ctx, testRequest())
				done <- outcome{err}
			}()
			child := readPID(t, pidFile)
			require.False(t, processGone(child), "child %d should be running", child)
			cancel(tt.cause)
			err := (<-done).err
			require.Equal(t, tt.class, Classify(err).Class, "error: %v", err)
			require.ErrorIs(t, err, tt.cause)
			require.Eventually(t, func() bool { return processGone(child) }, 10*time.Second, 5*time.Millisecond,
				"child %d outlived the attempt", child)
		})
	}
}

func TestCommandInvokerRealDeadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := shInvoker(t, "exec sleep 30", CommandConfig{}).Handle(ctx, testRequest())
	require.Equal(t, retry.ClassTimeout, Classify(err).Class, "error: %v", err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestCommandInvokerExpiredContextStartsNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithDeadline(t.Context(), time.Now())
	defer cancel()
	_, err := shInvoker(t, `touch "$1/ran"`, CommandConfig{}, dir).Handle(ctx, testRequest())
	require.Equal(t, retry.ClassTimeout, Classify(err).Class, "error: %v", err)
	require.NoFileExists(t, filepath.Join(dir, "ran"))
}

func TestCommandInvokerLeavesNoChildBehind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
	}{
		// The background child holds no pipe: Wait returns at once.
		{"DetachedFromPipes", `sleep 30 </dev/null >/dev/null 2>&1 & echo $! > "$1"`},
		// It holds stdout: Wait gives up after KillGrace.
		{"HoldingStdout", `sleep 30 & echo $! > "$1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pidFile := filepath.Join(t.TempDir(), "child.pid")
			inv := shInvoker(t, tt.script, CommandConfig{KillGrace: 100 * time.Millisecond}, pidFile)
			_, err := inv.Handle(t.Context(), testRequest())
			require.NoError(t, err)
			child := readPID(t, pidFile)
			require.Eventually(t, func() bool { return processGone(child) }, 10*time.Second, 5*time.Millisecond,
				"child %d outlived the attempt", child)
		})
	}
}

func TestCommandInvokerCannotStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "agent")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\nexit 0\n"), 0o644))
	tests := []struct {
		name string
		cfg  CommandConfig
	}{
		{"MissingFile", CommandConfig{Path: filepath.Join(dir, "no-such-agent")}},
		{"NotInPATH", CommandConfig{Path: "personaq-no-such-agent"}},
		{"NotExecutable", CommandConfig{Path: notExec}},
		{"MissingDir", CommandConfig{Path: "/bin/sh", Dir: filepath.Join(dir, "gone")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv, err := NewCommand(tt.cfg)
			require.NoError(t, err)
			_, err = inv.Handle(t.Context(), testRequest())
			require.Equal(t, retry.ClassTerminal, Classify(err).Class, "error: %v", err)
			require.ErrorContains(t, err, "cannot start")
		})
	}
}

func TestNewCommandRejectsBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cfg   CommandConfig
		field string
	}{
		{"NoPath", CommandConfig{}, "path: required"},
		{"NegativeTail", CommandConfig{Path: "x", StderrTail: -1}, "stderr_tail: must not be negative"},
		{"NegativeOutput", CommandConfig{Path: "x", MaxOutputBytes: -1}, "max_output_bytes: must not be negative"},
		{"NegativeGrace", CommandConfig{Path: "x", KillGrace: -time.Second}, "kill_grace: must not be negative"},
		{"CodeOutOfRange", CommandConfig{Path: "x", ExitCodes: map[int]retry.Class{256: retry.ClassRetryable}}, "exit_codes: 256"},
		{"SnoozeCode", CommandConfig{Path: "x", ExitCodes: map[int]retry.Class{3: retry.ClassSnooze}}, "exit_codes: 3: class snooze"},
		{"InvalidMessageCode", CommandConfig{Path: "x", ExitCodes: map[int]retry.Class{3: retry.ClassInvalidMessage}},
			"exit_codes: 3: class invalid_message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewCommand(tt.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.ErrorContains(t, err, "invalid config: "+tt.field)
		})
	}
}

func TestNewCommandDefaults(t *testing.T) {
	t.Parallel()
	inv, err := NewCommand(CommandConfig{Path: "agent", ExitCodes: map[int]retry.Class{1: retry.ClassRetryable}})
	require.NoError(t, err)
	want := DefaultExitCodes()
	want[1] = retry.ClassRetryable
	require.Equal(t, want, inv.cfg.ExitCodes)
	require.Equal(t, DefaultStderrTail, inv.cfg.StderrTail)
	require.Equal(t, DefaultMaxResponseBytes, inv.cfg.MaxOutputBytes)
	require.Equal(t, DefaultKillGrace, inv.cfg.KillGrace)
}

// TestStdoutSinkChunking feeds the same stdout whole and byte by byte.
func TestStdoutSinkChunking(t *testing.T) {
	t.Parallel()
	long := `{"progress":{"completed":1,"total":2},"pad":"` + strings.Repeat("x", maxProgressLine) + `"}`
	tests := []struct {
		name     string
		stdout   string
		progress retry.Progress
		out      string
	}{
		{"ProgressRemoved", "a\n{\"progress\":{\"completed\":1,\"total\":2}}\nb\n", retry.Progress{Completed: 1, Total: 2}, "a\nb\n"},
		{"LongLineIsOutput", long + "\n", retry.Progress{}, long + "\n"},
		{"Empty", "", retry.Progress{}, ""},
	}
	for _, tt := range tests {
		for _, chunk := range []int{1, 7, len(tt.stdout) + 1} {
			t.Run(tt.name+"Chunk"+strconv.Itoa(chunk), func(t *testing.T) {
				t.Parallel()
				s := &stdoutSink{max: DefaultMaxResponseBytes}
				for b := []byte(tt.stdout); len(b) > 0; {
					n := min(chunk, len(b))
					_, _ = s.Write(b[:n])
					b = b[n:]
				}
				s.endLine()
				require.Equal(t, tt.progress, s.progress)
				require.Equal(t, tt.out, string(s.out))
			})
		}
	}
}

// A command names its error type with a JSON line, on stdout or as the last
// line of stderr; the outermost type name is what the policy's
// non-retryable list is matched against.
func TestCommandInvokerNamesErrorType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
		types  []string
		text   string
		output string
	}{
		{"StdoutLine", `echo '{"error_type":"CommitError","error":"Nothing to commit"}'; exit 75`,
			[]string{"CommitError"}, "persona command sh: exit status 75: CommitError: Nothing to commit", ""},
		{"StdoutLineAmongOutput", `echo 'diff ready'; echo '{"error_type":"CommitError"}'; echo 'oops' >&2; exit 75`,
			[]string{"CommitError"}, "persona command sh: exit status 75: CommitError: oops", `"diff ready"`},
		{"LastStderrLine", `echo 'writing…' >&2; echo '{"error_type":"OutputWriteError","error":"disk full"}' >&2; exit 75`,
			[]string{"OutputWriteError"}, "persona command sh: exit status 75: OutputWriteError: disk full", ""},
		{"NotATypeName", `echo '{"error_type":"commit_error"}' >&2; exit 75`,
			[]string{"ExitError"}, `persona command sh: exit status 75: {"error_type":"commit_error"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := shInvoker(t, tt.script, CommandConfig{}).Handle(t.Context(), testRequest())
			c := Classify(err)
			require.Equal(t, tt.types, c.TypeNames)
			require.EqualError(t, err, tt.text)
			if tt.output == "" {
				require.Empty(t, res.Output)
			} else {
				require.JSONEq(t, tt.output, string(res.Output))
			}
			d := retry.Decide(retry.Input{Policy: retry.GitPolicy(), Current: retry.Attempt{Number: 1, Class: c.Class, ErrorTypes: c.TypeNames}})
			require.Equal(t, tt.types[0] == "CommitError", d.Action == retry.ActionQuarantine, "the git preset's list applies")
		})
	}
}

// What the agent printed before failing is kept (bounded), so the next
// attempt can be shown the answer that was wrong.
func TestCommandInvokerKeepsOutputOnFailure(t *testing.T) {
	t.Parallel()
	res, err := shInvoker(t, `echo '{"answer":"draft"}'; exit 65`, CommandConfig{}).Handle(t.Context(), testRequest())
	require.Equal(t, retry.ClassValidation, Classify(err).Class)
	require.JSONEq(t, `{"answer":"draft"}`, string(res.Output))

	res, err = shInvoker(t, `printf abcdefgh; exit 75`, CommandConfig{MaxOutputBytes: 4}).Handle(t.Context(), testRequest())
	require.Equal(t, retry.ClassRetryable, Classify(err).Class)
	require.Equal(t, `"abcd"`, string(res.Output))

	// The shell must get to its echo before the deadline: 300 ms was not
	// enough to start it under -race on a loaded machine (no output kept).
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	res, err = shInvoker(t, `echo 'half done'; exec sleep 30`, CommandConfig{KillGrace: 10 * time.Millisecond}).Handle(ctx, testRequest())
	require.Equal(t, retry.ClassTimeout, Classify(err).Class)
	require.Equal(t, `"half done"`, string(res.Output))
}

// Answers of 8 MiB pass when the limit is raised to it.
func TestCommandInvokerEightMiBOutput(t *testing.T) {
	t.Parallel()
	const size = 8 << 20
	res, err := shInvoker(t, `head -c 8388608 /dev/zero | tr '\\0' x`, CommandConfig{MaxOutputBytes: size}).Handle(t.Context(), testRequest())
	require.NoError(t, err)
	var out string
	require.NoError(t, json.Unmarshal(res.Output, &out))
	require.Len(t, out, size)
}
