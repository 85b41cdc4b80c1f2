package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/redis/go-redis/v9"
)

// The servers, each a process of its own so its CPU time can be read from
// /proc/<pid>/stat, all with every write fsynced before it is acknowledged:
//
//   - redis-server: appendonly yes, appendfsync always (no RDB snapshots;
//     -redis-appendfsync changes it);
//   - PostgreSQL: fsync=on, synchronous_commit=on (its defaults, set
//     explicitly), run as the postgres OS user when the driver is root;
//   - nats-server: this program re-run as `peers nats-server`, an embedded
//     nats-server/v2 with JetStream file storage and SyncAlways
//     (sync_interval: always).

// serverProc is one server the driver started.
type serverProc struct {
	name string
	cmd  *exec.Cmd
	stop syscall.Signal // the signal for a clean, fast shutdown
}

func (s *serverProc) pid() int { return s.cmd.Process.Pid }

// shutdown signals the server and waits for it (SIGKILL after 30 s).
func (s *serverProc) shutdown() {
	_ = s.cmd.Process.Signal(s.stop)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// startProc starts a server process that dies with the driver.
func startProc(name string, stop syscall.Signal, cred *syscall.Credential, dir, bin string, args ...string) (*serverProc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = nil, nil
	if log, err := os.Create(filepath.Join(dir, name+".log")); err == nil {
		cmd.Stdout, cmd.Stderr = log, log
		if cred != nil {
			_ = log.Chown(int(cred.Uid), int(cred.Gid))
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &serverProc{name: name, cmd: cmd, stop: stop}, nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady calls ready until it succeeds or 30 s pass.
func waitReady(name string, ready func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after 30 s: %w", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// findBinary returns the first of candidates that exists (PATH names are
// looked up), or an error naming the Debian package to install.
func findBinary(pkg string, candidates ...string) (string, error) {
	for _, c := range candidates {
		if filepath.IsAbs(c) {
			if _, err := os.Stat(c); err == nil {
				return c, nil
			}
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("none of %v found: install the Debian package %s (apt-get install %s)", candidates, pkg, pkg)
}

func startRedis(dir, appendfsync string) (*serverProc, string, error) {
	bin, err := findBinary("redis-server", "redis-server", "/usr/bin/redis-server", "/usr/sbin/redis-server")
	if err != nil {
		return nil, "", err
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := startProc("redis", syscall.SIGTERM, nil, dir, bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--appendonly", "yes", "--appendfsync", appendfsync, "--save", "",
		"--daemonize", "no", "--protected-mode", "no")
	if err != nil {
		return nil, "", err
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if err := waitReady("redis-server", func() error { return c.Ping(context.Background()).Err() }); err != nil {
		p.shutdown()
		return nil, "", err
	}
	return p, addr, nil
}

// postgresBinDir finds PostgreSQL's server binaries (Debian keeps them in
// /usr/lib/postgresql/<major>/bin, off PATH); PERSONAQ_PG_BIN overrides.
func postgresBinDir() (string, error) {
	if d := os.Getenv("PERSONAQ_PG_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err != nil {
			return "", fmt.Errorf("PERSONAQ_PG_BIN: %w", err)
		}
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { // highest major first
		ma, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		mb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return mb - ma
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL server binaries not found in /usr/lib/postgresql/*/bin or PATH: install the Debian package postgresql (apt-get install postgresql), or set PERSONAQ_PG_BIN")
}

// startPostgres initdb's a cluster in dir/pg and starts it on a free
// loopback port. PostgreSQL refuses to run as root: as root, initdb and
// postgres run as the postgres OS user (the Debian package creates it),
// owning dir.
func startPostgres(dir string) (*serverProc, string, error) {
	binDir, err := postgresBinDir()
	if err != nil {
		return nil, "", err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, "", fmt.Errorf("running as root, PostgreSQL must run as the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, "", err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(binDir, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	p, err := startProc("postgres", syscall.SIGINT, cred, dir, filepath.Join(binDir, "postgres"),
		"-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=on", "-c", "synchronous_commit=on",
		"-c", "full_page_writes=on", "-c", "max_connections=100")
	if err != nil {
		return nil, "", err
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	err = waitReady("postgres", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		return c.Close(ctx)
	})
	if err != nil {
		p.shutdown()
		return nil, "", err
	}
	return p, url, nil
}

// startNATS runs this program as `peers nats-server` in dir; with
// cpuprofile set, the server profiles itself between SIGUSR1 and SIGUSR2
// (sent by a profiled trial around its timed part).
func startNATS(dir, cpuprofile string) (*serverProc, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	args := []string{"nats-server", "-store", filepath.Join(dir, "jetstream"), "-port", strconv.Itoa(port)}
	if cpuprofile != "" {
		args = append(args, "-cpuprofile", cpuprofile)
	}
	p, err := startProc("nats", syscall.SIGTERM, nil, dir, exe, args...)
	if err != nil {
		return nil, "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	err = waitReady("nats-server", func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		p.shutdown()
		return nil, "", err
	}
	return p, "nats://" + addr, nil
}

// natsServerMain is `peers nats-server`: an embedded nats-server with
// JetStream file storage, every write fsynced (SyncAlways), until SIGTERM.
func natsServerMain(args []string) error {
	fs := flag.NewFlagSet("nats-server", flag.ExitOnError)
	store := fs.String("store", "", "JetStream store directory")
	port := fs.Int("port", 4222, "client port")
	cpuprofile := fs.String("cpuprofile", "", "on SIGUSR1 start a CPU profile, written here on SIGUSR2")
	_ = fs.Parse(args)
	if *cpuprofile != "" {
		defer profileOnSignal(*cpuprofile)()
	}
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: *port, JetStream: true, StoreDir: *store,
		SyncAlways: true, NoLog: true, NoSigs: true,
	})
	if err != nil {
		return err
	}
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		return errors.New("nats-server not ready after 30 s")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

// profileOnSignal starts a CPU profile on SIGUSR1 and writes it to path on
// SIGUSR2; the returned func writes it if it is still running.
func profileOnSignal(path string) (stop func()) {
	var mu sync.Mutex
	var f *os.File
	stop = func() {
		mu.Lock()
		defer mu.Unlock()
		if f != nil {
			pprof.StopCPUProfile()
			_ = f.Close()
			f = nil
		}
	}
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for sig := range ch {
			if sig == syscall.SIGUSR2 {
				stop()
				continue
			}
			mu.Lock()
			if f == nil {
				var err error
				if f, err = os.Create(path); err == nil {
					err = pprof.StartCPUProfile(f)
				}
				if err != nil {
					fmt.Fprintln(stderr, "nats-server: cpu profile:", err)
				}
			}
			mu.Unlock()
		}
	}()
	return stop
}
