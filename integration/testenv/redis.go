package testenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServerEnv names the environment variable that points at the
// redis-server binary to use instead of searching PATH, /usr/bin, /usr/sbin.
const RedisServerEnv = "PERSONAQ_REDIS_SERVER"

// redisReadyTimeout bounds how long StartRedis and Restart wait for PING.
const redisReadyTimeout = 10 * time.Second

// Redis is a real redis-server process listening on a free loopback port,
// without persistence (--save "" --appendonly no): a restart starts empty.
type Redis struct {
	// Addr is host:port, e.g. "127.0.0.1:41234".
	Addr string

	bin  string
	dir  string
	port int
	// spec adds a config file and arguments: cluster, replica, sentinel.
	spec redisSpec

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	adm    *redis.Client // see admin
}

// StartRedis starts a redis-server in tb.TempDir() on a free loopback port,
// waits until it answers PING and stops it when the test ends.
//
// Without a redis-server binary the test is skipped, or fails when the CI
// environment variable is set, so CI can never pass by skipping.
func StartRedis(tb testing.TB) *Redis {
	tb.Helper()
	return startRedis(tb, redisBinary(tb), redisSpec{})
}

// redisBinary finds redis-server, or skips the test (fails it when CI is set).
func redisBinary(tb testing.TB) string {
	tb.Helper()
	bin, err := findRedisServer()
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("testenv: %v (CI is set, so this is a failure, not a skip)", err)
		}
		tb.Skipf("testenv: %v", err)
	}
	return bin
}

// redisSpec is what a server runs with beyond the common arguments.
type redisSpec struct {
	// conf, when set, is written to redis.conf in the server's directory and
	// passed first (sentinels need a config file they can rewrite).
	conf string
	// args, when set, follow the common arguments.
	args func(r *Redis) []string
}

// startRedis starts bin on a free port with the common arguments and spec's,
// and stops it when the test ends.
func startRedis(tb testing.TB, bin string, spec redisSpec) *Redis {
	tb.Helper()
	r := &Redis{bin: bin, dir: tb.TempDir(), spec: spec}
	if spec.conf != "" {
		if err := os.WriteFile(filepath.Join(r.dir, "redis.conf"), []byte(spec.conf), 0o600); err != nil {
			tb.Fatalf("testenv: %v", err)
		}
	}
	// A free port can be taken by someone else between probing and binding;
	// try a few ports before giving up.
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("testenv: free port: %v", err)
		}
		r.port = port
		r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = r.start(); lastErr == nil {
			tb.Cleanup(r.close)
			return r
		}
	}
	tb.Fatalf("testenv: %v", lastErr)
	return nil
}

// URL is the go-redis URL of the server's database 0.
func (r *Redis) URL() string { return "redis://" + r.Addr + "/0" }

// Client returns a client of the server, closed when the test ends.
func (r *Redis) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop kills the server (SIGKILL, like a crash) and waits for it to exit.
// It is idempotent and safe to call from several goroutines.
func (r *Redis) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
}

// Restart stops the server (if running) and starts a new, empty one on the
// same port, so existing clients reconnect to it.
func (r *Redis) Restart(tb testing.TB) {
	tb.Helper()
	r.Stop()
	if err := r.start(); err != nil {
		tb.Fatalf("testenv: restart: %v", err)
	}
}

// Freeze stops the server process (SIGSTOP) without losing its data: an
// outage in which the server keeps everything (a hung host, a partition).
// Thaw resumes it.
func (r *Redis) Freeze(tb testing.TB) { r.signal(tb, syscall.SIGSTOP) }

// Thaw resumes a frozen server (SIGCONT).
func (r *Redis) Thaw(tb testing.TB) { r.signal(tb, syscall.SIGCONT) }

func (r *Redis) signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		tb.Fatalf("testenv: %v: redis-server is not running", sig)
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("testenv: %v: %v", sig, err)
	}
}

// PID is the server process's id, 0 while it is stopped (benchmarks read
// its CPU time from /proc).
func (r *Redis) PID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// Running reports whether the server process is up (started and not
// stopped).
func (r *Redis) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd != nil
}

// admin is a client for the helpers' own commands: one connection, no
// retries, so a stopped node answers with an error at once; RESP2, so
// sentinel replies are flat arrays.
func (r *Redis) admin() *redis.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.adm == nil {
		r.adm = redis.NewClient(&redis.Options{
			Addr: r.Addr, Protocol: 2, PoolSize: 1, MaxRetries: -1, DialTimeout: time.Second,
			ReadTimeout: 5 * time.Second, WriteTimeout: time.Second,
		})
	}
	return r.adm
}

// close stops the server and closes the helpers' client.
func (r *Redis) close() {
	r.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.adm != nil {
		_ = r.adm.Close()
	}
}

func (r *Redis) stopLocked() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.exited
	r.cmd = nil
}

// start launches redis-server on r.port and waits for PING.
func (r *Redis) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()

	out := &lockedBuffer{}
	var args []string
	if r.spec.conf != "" {
		args = append(args, filepath.Join(r.dir, "redis.conf"))
	}
	args = append(args,
		"--port", strconv.Itoa(r.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", r.dir,
		"--daemonize", "no",
	)
	if r.spec.args != nil {
		args = append(args, r.spec.args(r)...)
	}
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.dir
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", r.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	r.cmd, r.exited = cmd, exited

	if err := waitPing(r.Addr, exited); err != nil {
		r.stopLocked()
		return fmt.Errorf("redis-server on %s: %w; output:\n%s", r.Addr, err, out.String())
	}
	return nil
}

// waitPing polls PING until it answers, the process exits or
// redisReadyTimeout passes. It speaks RESP over a plain connection so no
// client-side dial backoff or circuit breaker delays the first answer.
func waitPing(addr string, exited <-chan struct{}) error {
	deadline := time.NewTimer(redisReadyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		if lastErr = ping(addr); lastErr == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("exited before answering PING")
		case <-deadline.C:
			return fmt.Errorf("no PING answer after %s: %w", redisReadyTimeout, lastErr)
		case <-tick.C:
		}
	}
}

// ping sends one PING and expects +PONG (a loading server answers -LOADING).
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if err := conn.SetDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line = strings.TrimSpace(line); line != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// findRedisServer returns the redis-server binary to run.
func findRedisServer() (string, error) {
	if p := os.Getenv(RedisServerEnv); p != "" {
		if isExecutable(p) {
			return p, nil
		}
		return "", fmt.Errorf("%s=%s is not an executable file", RedisServerEnv, p)
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/redis-server", "/usr/sbin/redis-server"} {
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", errors.New("redis-server not found (PATH, /usr/bin, /usr/sbin; or set " +
		RedisServerEnv + "): install it with `apt-get install redis-server`")
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lockedBuffer collects the server's output for failure messages.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
