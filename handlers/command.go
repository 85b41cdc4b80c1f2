//go:build unix

package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Defaults for CommandConfig.
const (
	DefaultStderrTail = 4 << 10
	DefaultKillGrace  = 2 * time.Second
)

// maxProgressLine bounds the stdout line examined for progress: a longer
// line is output, never a progress report.
const maxProgressLine = 4 << 10

// DefaultExitCodes returns the exit code classes used for codes that
// CommandConfig.ExitCodes does not name, after sysexits.h: EX_DATAERR (65)
// is a validation failure, EX_UNAVAILABLE (69) a network failure,
// EX_TEMPFAIL (75) retryable. 137 and 143 are retryable too: a shell
// reports a child killed by SIGKILL (the OOM killer) or SIGTERM as 128 plus
// the signal, and an agent behind a wrapper script (or one that traps
// SIGTERM to clean up) was killed from outside as surely as one the signal
// ended itself. A code in neither map is terminal, unless
// the program reported progress before it exited: a session that ran and
// then failed (wrong output, tests failed) is adaptive-retry material and
// is retried. Name a code terminal in CommandConfig.ExitCodes to make it
// terminal even then.
func DefaultExitCodes() map[int]retry.Class {
	return map[int]retry.Class{
		0:   retry.ClassSucceeded,
		65:  retry.ClassValidation,
		69:  retry.ClassNetwork,
		75:  retry.ClassRetryable,
		137: retry.ClassRetryable, // 128 + SIGKILL
		143: retry.ClassRetryable, // 128 + SIGTERM
	}
}

// CommandConfig configures a CommandInvoker.
type CommandConfig struct {
	// Path is the program; a name without a slash is looked up in PATH.
	// Required.
	Path string
	// Args follow the program name.
	Args []string
	// Env entries ("KEY=value") are added to personaq's own environment;
	// the PERSONAQ_* variables describing the attempt come last and win.
	Env []string
	// Dir is the working directory. Default: personaq's.
	Dir string
	// ExitCodes maps exit codes (0-255) to classes, overriding
	// DefaultExitCodes code by code. Snooze and invalid_message are not
	// allowed: an exit code cannot say for how long, nor judge the message.
	ExitCodes map[int]retry.Class
	// StderrTail is how many bytes from the end of stderr are kept as the
	// error text (and validation feedback). Default: 4 KiB.
	StderrTail int
	// MaxOutputBytes bounds the stdout kept as Result.Output (progress
	// and error-type lines excluded); a successful run that prints more
	// fails as terminal (ErrResponseTooLarge). Default: 1 MiB; raise it for
	// agents whose answers are larger (8 MiB is 8388608).
	MaxOutputBytes int
	// KillGrace is the time between SIGTERM and SIGKILL to the program's
	// process group once the attempt's context is done. Default: 2s.
	KillGrace time.Duration
}

func (c CommandConfig) validate() error {
	switch {
	case c.Path == "":
		return configErr("path", "required")
	case c.StderrTail < 0:
		return configErr("stderr_tail", "must not be negative, got %d", c.StderrTail)
	case c.MaxOutputBytes < 0:
		return configErr("max_output_bytes", "must not be negative, got %d", c.MaxOutputBytes)
	case c.KillGrace < 0:
		return configErr("kill_grace", "must not be negative, got %s", c.KillGrace)
	}
	for code, class := range c.ExitCodes {
		switch {
		case code < 0 || code > 255:
			return configErr("exit_codes", "%d: exit codes run from 0 to 255", code)
		case class > retry.ClassTerminal: // snooze, invalid_message, unknown
			return configErr("exit_codes", "%d: class %s cannot come from an exit code", code, class)
		}
	}
	return nil
}

func (c CommandConfig) withDefaults() CommandConfig {
	codes := DefaultExitCodes()
	maps.Copy(codes, c.ExitCodes)
	c.ExitCodes = codes
	c.Args, c.Env = slices.Clone(c.Args), slices.Clone(c.Env)
	if c.StderrTail == 0 {
		c.StderrTail = DefaultStderrTail
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = DefaultMaxResponseBytes
	}
	if c.KillGrace == 0 {
		c.KillGrace = DefaultKillGrace
	}
	return c
}

// CommandInvoker runs a persona as an external program (an agent CLI), one
// process per attempt.
//
// The program reads the attempt's Envelope as JSON on stdin and finds the
// attempt in PERSONAQ_* environment variables, and its trace context in
// TRACEPARENT and TRACESTATE. Stdout lines of the form
// {"progress":{"completed":N,"total":M}} report progress (the last wins);
// a line {"error_type":"CommitError","error":"nothing to commit"} on
// stdout, or as the last line of stderr, names the error type of a failed
// run (matched against the policy's non-retryable types); lines
// {"personaq_usage":{"input_tokens":N,"output_tokens":M,"cost_usd":C}} on
// stdout (or else on stderr) report the tokens and cost the run used, and
// add up (one line per model call, or one at the end); without one, an
// output that is one JSON document with a provider's "usage" object (an
// agent CLI's JSON result) reports that; the rest of stdout is the output,
// kept on failures too. The exit code picks the class
// (see DefaultExitCodes); the end of stderr is the error text. The program runs
// in its own process group, and nothing in that group outlives the attempt:
// when the context ends the group gets SIGTERM, then SIGKILL after
// KillGrace, and the attempt is a timeout (or cancelled, when its request
// was). The group is led by a supervisor process (this binary re-executed:
// one more process and a few MB per agent) that kills it when the replica
// dies, or when the attempt's lease runs out unrenewed while the replica
// is frozen, before another replica can start the request again.
type CommandInvoker struct {
	cfg CommandConfig
}

// NewCommand validates cfg and returns an invoker. The program itself is
// looked for at each attempt, so one installed later is picked up.
func NewCommand(cfg CommandConfig) (*CommandInvoker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &CommandInvoker{cfg: cfg.withDefaults()}, nil
}

// Handle implements Handler.
func (c *CommandInvoker) Handle(ctx context.Context, req *Request) (Result, error) {
	if ctx.Err() != nil {
		return Result{}, interrupted(ctx, fmt.Errorf("persona command %s not started", c.name()))
	}
	stdin, err := json.Marshal(NewEnvelope(req))
	if err != nil {
		return Result{}, Terminal(fmt.Errorf("encode persona request: %w", err))
	}
	stdout := &stdoutSink{max: c.cfg.MaxOutputBytes, live: OutputWriter(ctx)}
	stderr := &tailWriter{max: c.cfg.StderrTail}
	cmd := c.command(req, stdin)
	cmd.Env = append(cmd.Env, traceEnv(ctx)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	sup, err := c.start(cmd, req)
	if err != nil {
		return Result{}, c.startError(err)
	}
	if sup != nil {
		defer sup.end()
	}
	stopped := c.wait(ctx, cmd)
	stdout.endLine()
	// The output is kept on failures too: the next attempt may be shown it.
	res := Result{Progress: stdout.progress, Output: outputOf(stdout.out)}
	var stderrText string
	res.Usage, stderrText = commandUsage(stdout, stderr.String())
	if stopped {
		return res, interrupted(ctx, fmt.Errorf("persona command %s stopped", c.name()))
	}
	if err := c.exitError(cmd.ProcessState, stdout, stderrText); err != nil {
		return res, err
	}
	if stdout.overflow {
		return res, Terminal(fmt.Errorf("%w: over %d bytes on stdout", ErrResponseTooLarge, c.cfg.MaxOutputBytes))
	}
	return res, nil
}

func (c *CommandInvoker) name() string { return filepath.Base(c.cfg.Path) }

func (c *CommandInvoker) command(req *Request, stdin []byte) *exec.Cmd {
	cmd := exec.Command(c.cfg.Path, c.cfg.Args...)
	cmd.Dir = c.cfg.Dir
	cmd.Env = slices.Concat(os.Environ(), c.cfg.Env, attemptEnv(req))
	cmd.Stdin = bytes.NewReader(stdin)
	// Its own group, so one signal reaches everything the agent spawned
	// (led by the agent's supervisor, see start).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A process that escaped the group (setsid) may hold stdout open; do
	// not wait on it longer than the grace period.
	cmd.WaitDelay = c.cfg.KillGrace
	return cmd
}

// start starts the agent under its supervisor (see supervisor.go), which
// kills the agent's whole group when this replica dies, or when the
// attempt's lease deadline passes without a renewal reaching it (this
// process frozen): the agent never outlives its claim. The returned
// supervision feeds it the lease deadline until ended (nil: started
// unsupervised, as when this binary's path is unknown).
func (c *CommandInvoker) start(cmd *exec.Cmd, req *Request) (*supervision, error) {
	sup, err := supervise(cmd, c.cfg.KillGrace)
	if err != nil {
		return nil, err
	}
	if sup == nil {
		dieWithReplica(cmd.SysProcAttr)
		return nil, cmd.Start()
	}
	if err := sup.launch(cmd, cmd.Args[1], req.LeaseDeadline); err != nil {
		return nil, err
	}
	return sup, nil
}

func attemptEnv(req *Request) []string {
	m := req.Message
	return []string{
		schemas.EnvAttempt + "=" + strconv.Itoa(req.Attempt),
		schemas.EnvAgent + "=" + req.Agent,
		schemas.EnvRole + "=" + string(req.Role),
		schemas.EnvTaskID + "=" + m.TaskID,
		schemas.EnvStep + "=" + m.Step,
		schemas.EnvPersona + "=" + m.Persona,
		schemas.EnvRequestID + "=" + m.RequestID,
		schemas.EnvCorrelationID + "=" + correlationID(m),
		schemas.EnvIdempotencyKey + "=" + idempotencyKey(req),
		schemas.EnvProgressInterval + "=" + strconv.FormatInt(req.ProgressInterval.Milliseconds(), 10),
	}
}

// wait waits for cmd, stopping its process group if ctx ends first, and
// reports whether it had to. Either way the group is SIGKILLed once the
// program has exited, so no child of it outlives the attempt.
func (c *CommandInvoker) wait(ctx context.Context, cmd *exec.Cmd) (stopped bool) {
	pgid := cmd.Process.Pid
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the outcome is read from cmd.ProcessState
		close(done)
	}()
	defer signalGroup(pgid, syscall.SIGKILL)
	select {
	case <-done:
		return false
	case <-ctx.Done():
	}
	signalGroup(pgid, syscall.SIGTERM)
	grace := time.NewTimer(c.cfg.KillGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		signalGroup(pgid, syscall.SIGKILL)
		<-done
	}
	return true
}

// signalGroup ignores ESRCH: the group being gone already is the goal.
func signalGroup(pgid int, sig syscall.Signal) { _ = syscall.Kill(-pgid, sig) }

// startError: a program that is missing, not executable, or given an
// impossible environment will not start next time either; anything else
// (e.g. EAGAIN, out of processes) may pass.
func (c *CommandInvoker) startError(err error) error {
	err = fmt.Errorf("persona command %q cannot start: %w", c.cfg.Path, err)
	for _, target := range []error{exec.ErrNotFound, exec.ErrDot, fs.ErrNotExist, fs.ErrPermission, syscall.ENOEXEC, syscall.EINVAL} {
		if errors.Is(err, target) {
			return Terminal(err)
		}
	}
	return Retryable(err)
}

// exitError maps how the program ended onto a class.
func (c *CommandInvoker) exitError(st *os.ProcessState, stdout *stdoutSink, stderr string) error {
	if st == nil { // Wait could not reap it (someone else did): unknown outcome
		return Retryable(fmt.Errorf("persona command %s: exit status lost", c.name()))
	}
	e := &ExitError{Code: st.ExitCode(), Stderr: stderr, Type: stdout.errType, Message: stdout.errMsg}
	if e.Type == "" {
		e.Type, e.Message = parseErrorType([]byte(lastLine(stderr)), true)
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		// Killed from outside (OOM killer, an operator): the next run may
		// well survive, and the policy bounds how often we try.
		e.Signal = ws.Signal()
		return Retryable(fmt.Errorf("persona command %s: %w", c.name(), e))
	}
	class, ok := c.cfg.ExitCodes[e.Code]
	switch {
	case ok:
	case stdout.progress.Known():
		class = retry.ClassRetryable // ran, reported progress, failed: adaptive retry
	default:
		class = retry.ClassTerminal
	}
	err := fmt.Errorf("persona command %s: %w", c.name(), e)
	switch class {
	case retry.ClassSucceeded:
		return nil
	case retry.ClassValidation:
		return Validation(stderr, err)
	}
	return classed(class, err)
}

// ExitError is a persona command that did not exit successfully.
type ExitError struct {
	// Code is the exit status, or -1 when a signal ended the program.
	Code int
	// Signal is the signal that ended the program, if one did.
	Signal syscall.Signal
	// Stderr is the end of the program's standard error.
	Stderr string
	// Type is the error type the program named in an error_type line;
	// empty when it named none. Message is that line's error text.
	Type, Message string
}

func (e *ExitError) Error() string {
	parts := []string{fmt.Sprintf("exit status %d", e.Code)}
	if e.Signal != 0 {
		parts[0] = fmt.Sprintf("terminated by signal %d (%s)", int(e.Signal), e.Signal)
	}
	for _, s := range []string{e.Type, e.Message} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	if e.Message == "" && e.Stderr != "" { // a named message says it better
		parts = append(parts, e.Stderr)
	}
	return strings.Join(parts, ": ")
}

// ErrorType is the type the program named, or "ExitError": the outermost
// type name non-retryable lists are matched against.
func (e *ExitError) ErrorType() string {
	if e.Type != "" {
		return e.Type
	}
	return "ExitError"
}

// stdoutSink keeps a program's stdout, bounded, taking progress reports out
// of it as they stream by.
type stdoutSink struct {
	max      int
	out      []byte
	overflow bool
	progress retry.Progress
	// errType and errMsg come from the last error_type line.
	errType, errMsg string
	line            []byte
	long            bool // the current line is too long to be a progress report

	// usage sums the usage lines (usageSeen: there was one).
	usage     retry.Usage
	usageSeen bool
	// live receives the text of live output lines (see OutputKey).
	live io.Writer
}

func (s *stdoutSink) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.add(p)
			break
		}
		s.add(p[:i+1])
		s.endLine()
		p = p[i+1:]
	}
	return n, nil
}

// add appends a piece of the current line.
func (s *stdoutSink) add(b []byte) {
	if !s.long && len(s.line)+len(b) <= maxProgressLine {
		s.line = append(s.line, b...)
		return
	}
	if !s.long {
		s.keep(s.line)
		s.long = true
	}
	s.keep(b)
}

// endLine finishes the current line: a progress report updates progress,
// an error_type line names the error, and a line that says nothing else is
// left out of the output.
func (s *stdoutSink) endLine() {
	if !s.long {
		p, isProgress := parseProgress(s.line)
		if isProgress {
			s.progress = p
		}
		t, msg := parseErrorType(s.line, true)
		if t != "" {
			s.errType, s.errMsg = t, msg
		}
		u, isUsage := parseUsageLine(s.line)
		if isUsage {
			s.usage, s.usageSeen = s.usage.Add(u), true
		}
		text, isOutput := parseOutputLine(s.line)
		if isOutput && s.live != nil {
			_, _ = io.WriteString(s.live, text) // never fails: see OutputWriter
		}
		if !isUsage && !isOutput && !(isProgress && reportOnly(s.line, &progressReport{})) && !(t != "" && reportOnly(s.line, &errorLine{})) {
			s.keep(s.line)
		}
	}
	s.line, s.long = s.line[:0], false
}

// errorLine is a command's error_type line and nothing else.
type errorLine struct {
	ErrorType string          `json:"error_type"`
	Error     json.RawMessage `json:"error"`
}

func (s *stdoutSink) keep(b []byte) {
	if room := s.max - len(s.out); len(b) > room {
		s.overflow = true
		b = b[:room]
	}
	s.out = append(s.out, b...)
}

// reportOnly reports whether line decodes into v (a report type) with no
// other field.
func reportOnly(line []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	return dec.Decode(v) == nil && !dec.More()
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max int
	buf []byte
	cut bool
}

func (t *tailWriter) Write(p []byte) (int, error) {
	if len(p) >= t.max {
		// Do not grow the buffer to the size of one huge write.
		t.buf, t.cut = append(t.buf[:0], p[len(p)-t.max:]...), true
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf, t.cut = t.buf[over:], true
	}
	return len(p), nil
}

// String returns the tail, starting on a whole character.
func (t *tailWriter) String() string {
	b := t.buf
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	s := strings.TrimSpace(string(b))
	if t.cut && s != "" {
		return "…" + s
	}
	return s
}
