// Command peers compares personaq with two other Go job queues, asynq
// (Redis) and River (PostgreSQL), on this machine, with the same workload
// and every write fsynced in all three. It starts its own redis-server,
// PostgreSQL and nats-server in a temp dir, runs each system in a child
// process (`peers trial`), interleaved over several rounds, and prints a
// markdown table. BENCHMARKS.md ("Peers: asynq and River") has the figures
// and how each is computed; `make bench-peers` runs it.
//
//	go run ./cmd/peers [-rounds 3] [-cpuprofile personaq.pprof]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/nats-io/nats-server/v2/server"
)

var stderr io.Writer = os.Stderr

func main() {
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "trial":
		err = trialMain(os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "nats-server":
		err = natsServerMain(os.Args[2:])
	default:
		err = driverMain(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(stderr, "peers:", err)
		os.Exit(1)
	}
}

// driver is the state of one comparison.
type driver struct {
	exe                   string
	redis, pg, nats       *serverProc
	redisAddr, pgURL, url string
	trials                int
	appendfsync           string // redis-server's
}

func driverMain(args []string) error {
	fs := flag.NewFlagSet("peers", flag.ExitOnError)
	rounds := fs.Int("rounds", 3, "rounds; each runs every system once, in a rotated order")
	jobs := fs.Int("jobs", 10_000, "jobs per throughput run, enqueued before the workers start")
	workers := fs.Int("workers", 64, "concurrency of the throughput runs")
	retries := fs.Int("retries", 200, "jobs per retry-lateness run (each fails once)")
	retryWorkers := fs.Int("retry-workers", 200, "concurrency of the retry-lateness runs")
	systemList := fs.String("systems", "asynq,river-default,river-tuned,personaq,personaq-noledger,personaq-floor,personaq-floor-noledger", "systems to run (the personaq-floor ones: throughput only, the least work personaq's durability contract asks for; not defaults: personaq-floor-nofinish, the floor without the ledger's Finish, and personaq-floor-minredis, the floor with the cheapest Redis write in place of each of the ledger's calls)")
	caseList := fs.String("cases", "throughput,spread,burst", "cases to run")
	appendfsync := fs.String("redis-appendfsync", "always", "redis-server's appendfsync (always, everysec or no): the ledger's and asynq's server; always is the comparison's setting (every write fsynced), everysec the compose file's for the ledger")
	cpuprofile := fs.String("cpuprofile", "", "after the rounds, run personaq's throughput case once more with CPU profiles of the runtime (this file) and of the nats-server (this file + .nats), and print their top entries")
	profileSystem := fs.String("profile-system", "personaq", "the system -cpuprofile profiles (personaq or personaq-noledger)")
	_ = fs.Parse(args)
	if *profileSystem != "personaq" && *profileSystem != "personaq-noledger" {
		return fmt.Errorf("-profile-system: %q is not personaq or personaq-noledger", *profileSystem)
	}
	names := strings.Split(*systemList, ",")
	for _, n := range names {
		if _, ok := systems[n]; !ok {
			return fmt.Errorf("unknown system %q", n)
		}
	}
	cases := strings.Split(*caseList, ",")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	root, err := os.MkdirTemp("", "personaq-peers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	if err := os.Chmod(root, 0o755); err != nil { // the postgres user enters it
		return err
	}
	switch *appendfsync {
	case "always", "everysec", "no":
	default:
		return fmt.Errorf("-redis-appendfsync: %q is not always, everysec or no", *appendfsync)
	}
	d := &driver{exe: exe, appendfsync: *appendfsync}
	defer d.shutdown()
	if err := d.startServers(root); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "peers: servers up in %s; load %s\n", root, loadAvg())

	results := map[string]map[string][]*trialResult{}
	loads := []string{loadAvg()}
	var failed []string
	for r := range *rounds {
		order := append(slices.Clone(names[r%len(names):]), names[:r%len(names)]...)
		for _, sys := range order {
			for _, c := range cases {
				if c != caseThroughput && strings.HasPrefix(sys, "personaq-floor") {
					continue // the floor loop never fails a job: no retries to time
				}
				n, w := *jobs, *workers
				if c != caseThroughput {
					n, w = *retries, *retryWorkers
				}
				res, err := d.trial(ctx, sys, c, n, w, "", d.url)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil { // reported, and left out of the table
					fmt.Fprintf(stderr, "peers: round %d/%d: %v\n", r+1, *rounds, err)
					failed = append(failed, fmt.Sprintf("round %d %s %s", r+1, sys, c))
					continue
				}
				if results[sys] == nil {
					results[sys] = map[string][]*trialResult{}
				}
				results[sys][c] = append(results[sys][c], res)
				fmt.Fprintf(stderr, "peers: round %d/%d %-17s %-10s %s (load %s)\n", r+1, *rounds, sys, c, summary(res), loadAvg())
			}
		}
		loads = append(loads, loadAvg())
	}
	printReport(os.Stdout, names, results, *rounds, loads)
	if len(failed) > 0 {
		fmt.Printf("\nFailed trials, not in the table: %s\n", strings.Join(failed, "; "))
	}

	if *cpuprofile != "" {
		if err := d.profile(ctx, root, *profileSystem, *cpuprofile, *jobs, *workers); err != nil {
			return err
		}
	}
	return nil
}

func (d *driver) startServers(root string) error {
	mk := func(name string) (string, error) {
		dir := filepath.Join(root, name)
		return dir, os.Mkdir(dir, 0o755)
	}
	dir, err := mk("redis")
	if err != nil {
		return err
	}
	if d.redis, d.redisAddr, err = startRedis(dir, d.appendfsync); err != nil {
		return err
	}
	if dir, err = mk("postgres"); err != nil {
		return err
	}
	if d.pg, d.pgURL, err = startPostgres(dir); err != nil {
		return err
	}
	if dir, err = mk("nats"); err != nil {
		return err
	}
	d.nats, d.url, err = startNATS(dir, "")
	return err
}

func (d *driver) shutdown() {
	for _, p := range []*serverProc{d.nats, d.pg, d.redis} {
		if p != nil {
			p.shutdown()
		}
	}
}

// serversOf are the servers whose CPU a system's trial reports, by name
// and pid.
func (d *driver) serversOf(system string, nats *serverProc) (names []string, pids []int) {
	switch system {
	case "asynq":
		return []string{"redis"}, []int{d.redis.pid()}
	case "river-default", "river-tuned":
		return []string{"postgres"}, []int{d.pg.pid()}
	case "personaq", "personaq-floor", "personaq-floor-nofinish", "personaq-floor-minredis":
		return []string{"nats", "redis"}, []int{nats.pid(), d.redis.pid()}
	default: // personaq-noledger, personaq-floor-noledger
		return []string{"nats"}, []int{nats.pid()}
	}
}

// trial runs one `peers trial` child and returns its result.
func (d *driver) trial(ctx context.Context, system, kase string, jobs, workers int, cpuprofile, natsURL string) (*trialResult, error) {
	d.trials++
	nats := d.nats
	names, each := d.serversOf(system, nats)
	var pids []string
	for _, pid := range each {
		pids = append(pids, strconv.Itoa(pid))
	}
	args := []string{"trial", "-system", system, "-case", kase,
		"-jobs", strconv.Itoa(jobs), "-workers", strconv.Itoa(workers),
		"-id", fmt.Sprintf("t%d", d.trials), "-redis", d.redisAddr, "-pg", d.pgURL, "-nats", natsURL,
		"-server-pids", strings.Join(pids, ",")}
	if cpuprofile != "" {
		args = append(args, "-cpuprofile", cpuprofile, "-profile-pid", strconv.Itoa(nats.pid()))
	}
	cmd := exec.CommandContext(ctx, d.exe, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("trial %s %s: %w", system, kase, err)
	}
	var res trialResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("trial %s %s: %w (output %q)", system, kase, err, out.String())
	}
	res.servers = names
	return &res, nil
}

// profile runs personaq's throughput case once more against a nats-server
// of its own, with CPU profiles of the runtime process and of that server,
// and prints both profiles' top entries (go tool pprof -top).
func (d *driver) profile(ctx context.Context, root, system, path string, jobs, workers int) error {
	path, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "nats-profiled")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	nats, url, err := startNATS(dir, path+".nats")
	if err != nil {
		return err
	}
	saved := d.nats
	d.nats = nats
	res, err := d.trial(ctx, system, caseThroughput, jobs, workers, path, url)
	d.nats = saved
	nats.shutdown()
	if err != nil {
		return err
	}
	fmt.Printf("\nProfiled run (%s, throughput, not in the table): %s; load %s\n", system, summary(res), loadAvg())
	for _, p := range []struct{ what, file string }{
		{"personaq runtime process (the queue client)", path},
		{"nats-server process", path + ".nats"},
	} {
		for _, view := range [][]string{{"-top"}, {"-top", "-cum"}} {
			args := append(append([]string{"tool", "pprof"}, view...), "-nodecount=15", p.file)
			out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
			if err != nil {
				fmt.Printf("\n%s: profile in %s (go tool pprof failed: %v)\n", p.what, p.file, err)
				break
			}
			fmt.Printf("\n%s: `go tool pprof %s -nodecount=15 %s`\n\n```\n%s```\n",
				p.what, strings.Join(view, " "), filepath.Base(p.file), out)
		}
	}
	return nil
}

func summary(r *trialResult) string {
	if r.Case == caseThroughput {
		return fmt.Sprintf("%.0f jobs/s, CPU per 1,000 jobs: client %.2f s + servers %.2f s (%s), first job after %.0f ms%s",
			float64(r.Jobs)/r.Seconds, 1000*r.ClientCPU/float64(r.Jobs), 1000*r.ServerCPU/float64(r.Jobs), r.eachServer(), 1000*r.FirstJob, r.batches())
	}
	s := sortedCopy(r.Lateness)
	return fmt.Sprintf("retry lateness p50 %.1f ms, p99 %.1f ms, min %.1f ms (%d retries)",
		percentile(s, 0.5), percentile(s, 0.99), percentile(s, 0), len(s))
}

// batches describes the runtime's terminal-record batch commits, if any.
func (r *trialResult) batches() string {
	if r.RecordBatches == 0 {
		return ""
	}
	return fmt.Sprintf("; terminal records: %d batch commits of %.1f on average (%.0f %% of the jobs' records), %.1f ms per commit",
		r.RecordBatches, float64(r.RecordsBatched)/float64(r.RecordBatches), 100*float64(r.RecordsBatched)/float64(r.Jobs),
		1000*r.BatchSeconds/float64(r.RecordBatches))
}

// printReport writes the markdown table: throughput and CPU are the median
// of the rounds (throughput with its min–max); lateness percentiles are
// over every round's retries pooled.
func printReport(w io.Writer, names []string, results map[string]map[string][]*trialResult, rounds int, loads []string) {
	fmt.Fprintf(w, "\n%d rounds, interleaved; %d CPUs; %s; load average (1/5/15 min) before and after each round: %s\n\n",
		rounds, runtime.NumCPU(), versions(), strings.Join(loads, " → "))
	fmt.Fprintln(w, "| system | jobs/s (median, min–max) | CPU s per 1,000 jobs: client + servers = total | retries spread out, lateness p50 / p99 (min) ms | retries due at once, lateness p50 / p99 (min) ms |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, sys := range names {
		rs := results[sys]
		row := []string{sys, "–", "–", "–", "–"}
		if t := rs[caseThroughput]; len(t) > 0 {
			var rates, client, srv []float64
			for _, r := range t {
				rates = append(rates, float64(r.Jobs)/r.Seconds)
				client = append(client, 1000*r.ClientCPU/float64(r.Jobs))
				srv = append(srv, 1000*r.ServerCPU/float64(r.Jobs))
			}
			rs := sortedCopy(rates)
			row[1] = fmt.Sprintf("%.0f (%.0f–%.0f)", median(rates), rs[0], rs[len(rs)-1])
			c, s := median(client), median(srv)
			row[2] = fmt.Sprintf("%.2f + %.2f = %.2f", c, s, c+s)
		}
		for i, c := range []string{caseSpread, caseBurst} {
			var all []float64
			for _, r := range rs[c] {
				all = append(all, r.Lateness...)
			}
			if len(all) > 0 {
				s := sortedCopy(all)
				row[3+i] = fmt.Sprintf("%.1f / %.1f (%.1f)", percentile(s, 0.5), percentile(s, 0.99), percentile(s, 0))
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintln(w, "\njobs/s per round, in round order (time from starting the workers to the first handler call):")
	for _, sys := range names {
		var rates []string
		for _, r := range results[sys][caseThroughput] {
			rates = append(rates, fmt.Sprintf("%.0f (%.0f ms)", float64(r.Jobs)/r.Seconds, 1000*r.FirstJob))
		}
		fmt.Fprintf(w, "- %s: %s\n", sys, strings.Join(rates, ", "))
	}
}

// versions names the queue libraries and servers measured.
func versions() string {
	mods := map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			mods[m.Path] = m.Version
		}
	}
	var pg, rd string
	if dir, err := postgresBinDir(); err == nil {
		out, _ := exec.Command(filepath.Join(dir, "postgres"), "--version").Output()
		pg = strings.TrimSpace(string(out))
	}
	if bin, err := findBinary("redis-server", "redis-server", "/usr/bin/redis-server"); err == nil {
		out, _ := exec.Command(bin, "--version").Output()
		if f := strings.Fields(string(out)); len(f) > 2 {
			rd = "redis-server " + strings.TrimPrefix(f[2], "v=")
		}
	}
	return fmt.Sprintf("%s; asynq %s; river %s; pgx %s; nats-server %s; %s; %s",
		runtime.Version(), mods["github.com/hibiken/asynq"], mods["github.com/riverqueue/river"],
		mods["github.com/jackc/pgx/v5"], server.VERSION, rd, pg)
}

// loadAvg is /proc/loadavg's three load averages.
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func sortedCopy(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

func median(xs []float64) float64 { return percentile(sortedCopy(xs), 0.5) }

// percentile is the q-quantile of sorted by nearest rank (the median of an
// even count is the lower middle).
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := max(int(math.Ceil(q*float64(len(sorted))))-1, 0)
	return sorted[i]
}
