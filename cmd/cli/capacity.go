package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/personaq/personaq/deployments/capacity"
)

func init() { register(newCapacityCmd) }

func newCapacityCmd(g *globals) *cobra.Command {
	var w capacity.Workload
	var output string
	cmd := &cobra.Command{
		Use:   "capacity --rps N --persona-time D [--retry-rate R] [--output-size B]",
		Short: "Size a deployment for a workload: replicas, JetStream clusters, Redis, storage",
		Long: `capacity turns a workload into replicas, R3 JetStream clusters, Redis masters and
stream storage, from the per-request costs measured in deployments/CAPACITY.md (CPU
per attempt in a replica, in nats-server and in Redis; Redis memory per task-step;
bytes per stored record). Cores and clusters are sized to 70% utilisation.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			p, err := capacity.Measured.Plan(w)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(p)
			}
			return writePlan(g.stdout, p)
		},
	}
	f := cmd.Flags()
	f.Float64Var(&w.RPS, "rps", 0, "new requests per second (required)")
	f.DurationVar(&w.PersonaTime, "persona-time", 0, "mean duration of one attempt, e.g. 45s (required)")
	f.Float64Var(&w.RetryRate, "retry-rate", 0, "extra attempts per request: 0.2 = 1.2 attempts per request")
	f.IntVar(&w.OutputSize, "output-size", 0, "mean persona answer in bytes")
	f.Float64Var(&w.QuarantineRate, "quarantine-rate", 0.01, "share of requests that end quarantined")
	f.IntVar(&w.Slots, "slots", 64, "concurrency of one replica")
	f.DurationVar(&w.LedgerTTL, "ledger-ttl", 168*time.Hour, "redis.ttl: how long a step's ledger entry is kept")
	f.DurationVar(&w.OutcomesMaxAge, "outcomes-max-age", 168*time.Hour, "how long terminal records are kept")
	f.DurationVar(&w.AttemptsMaxAge, "attempts-max-age", 24*time.Hour, "how long attempt events are kept (memory storage)")
	f.Int64Var(&w.AttemptsMaxBytes, "attempts-max-bytes", 256<<20, "byte cap of each attempt events stream: past it the oldest go")
	f.Float64Var(&w.QuarantineDays, "quarantine-days", 30, "days of quarantine records kept before purging")
	f.StringVarP(&output, "output", "o", "text", "output: text|json")
	return cmd
}

func writePlan(out io.Writer, p capacity.Plan) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	s := p.Storage
	for _, row := range [][2]string{
		{"attempts/s", fmt.Sprintf("%.4g", p.AttemptsPerSecond)},
		{"in flight", fmt.Sprintf("%.4g", p.InFlight)},
		{"replicas", fmt.Sprintf("%d × %d slots (%.3g cores, %s each)", p.Replicas, p.Workload.Slots, p.ReplicaCores, bytesText(p.ReplicaMemory))},
		{"JetStream", fmt.Sprintf("%d R3 cluster(s), %.3g cores in all", p.NATSClusters, p.NATSCores)},
		{"Redis", fmt.Sprintf("%d master(s) + replicas, %.3g cores, %s of ledger", p.RedisMasters, p.RedisCores, bytesText(p.RedisMemory))},
		{"requests (in flight, acked < 2 s)", bytesText(s.RequestsBacklog)},
		{"terminal records", fmt.Sprintf("%s (kept %s)", bytesText(s.Outcomes), p.Workload.OutcomesMaxAge)},
		{"large outputs", bytesText(s.Outputs)},
		{"quarantine", fmt.Sprintf("%s (%g days)", bytesText(s.Quarantine), p.Workload.QuarantineDays)},
		{"attempt events (memory)", fmt.Sprintf("%s (kept %s%s)", bytesText(s.AttemptsMemory), s.AttemptsKept, attemptsCapped(p))},
		{"per million requests/day", bytesText(s.PerMillionPerDay) + " per day kept (one copy)"},
	} {
		fmt.Fprintf(w, "%s\t%s\n", row[0], row[1])
	}
	fmt.Fprintln(w, "storage is on the JetStream servers, three copies (R3)")
	return w.Flush()
}

// attemptsCapped says when the attempt streams' byte cap, not their age
// limit, decides how long events are kept.
func attemptsCapped(p capacity.Plan) string {
	if p.Storage.AttemptsKept < p.Workload.AttemptsMaxAge {
		return fmt.Sprintf(": the %s cap is reached before attempts_max_age %s", bytesText(float64(p.Workload.AttemptsMaxBytes)), p.Workload.AttemptsMaxAge)
	}
	return ""
}

// bytesText prints n bytes with a binary unit.
func bytesText(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	return fmt.Sprintf("%.3g %s", n, units[i])
}
