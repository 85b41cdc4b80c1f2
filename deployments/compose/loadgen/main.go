// Command loadgen publishes a batch of persona requests for the compose
// demo (scale-demo.sh): the same messages `personaq publish` sends, through
// the same wire.PublishRequest, over one connection and many at once
// instead of one process per request.
//
//	go run ./deployments/compose/loadgen -nats-url nats://publisher:…@127.0.0.1:4222 \
//	    -requests echo=1200,flaky=60,reject=30 -input '{"work_ms":200}'
//
// It prints how many were stored (and how many were duplicates) and exits
// non-zero if any publish failed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

func main() {
	url := flag.String("nats-url", "nats://127.0.0.1:4222", "NATS URL (with user:password@ for the publisher user)")
	spec := flag.String("requests", "echo=100", "persona=count,… to publish")
	input := flag.String("input", "", "request input (JSON), the same for every request")
	workers := flag.Int("concurrency", 32, "publishes in flight")
	prefix := flag.String("task-prefix", "load", "task ids are <prefix>-<persona>-<n>")
	flag.Parse()
	if err := run(*url, *spec, *input, *prefix, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

type job struct{ persona, task string }

func run(url, spec, input, prefix string, workers int) error {
	counts, err := parseSpec(spec)
	if err != nil {
		return err
	}
	var in json.RawMessage
	if input != "" {
		if !json.Valid([]byte(input)) {
			return fmt.Errorf("-input: not valid JSON")
		}
		in = json.RawMessage(input)
	}
	nc, err := nats.Connect(url, nats.Name("personaq-loadgen"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	jobs := make(chan job)
	var stored, dups, failed atomic.Int64
	var firstErr sync.Once
	var errMsg string
	var wg sync.WaitGroup
	start := time.Now()
	for range max(workers, 1) {
		wg.Go(func() {
			for j := range jobs {
				req := schemas.NewRequest(j.task, "main", j.persona)
				req.Input = in
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				ack, err := wire.PublishRequest(ctx, js, wire.Topology{}, req)
				cancel()
				switch {
				case err != nil:
					failed.Add(1)
					firstErr.Do(func() { errMsg = err.Error() })
				case ack.Duplicate:
					dups.Add(1)
				default:
					stored.Add(1)
				}
			}
		})
	}
	for _, c := range counts {
		for i := 1; i <= c.n; i++ {
			jobs <- job{persona: c.persona, task: fmt.Sprintf("%s-%s-%05d", prefix, c.persona, i)}
		}
	}
	close(jobs)
	wg.Wait()
	fmt.Printf("published %d requests (%s) in %.2f s: %d stored, %d duplicates, %d failed\n",
		stored.Load()+dups.Load()+failed.Load(), spec, time.Since(start).Seconds(), stored.Load(), dups.Load(), failed.Load())
	if failed.Load() > 0 {
		return fmt.Errorf("%d publishes failed, the first: %s", failed.Load(), errMsg)
	}
	return nil
}

type count struct {
	persona string
	n       int
}

func parseSpec(spec string) ([]count, error) {
	var out []count
	for part := range strings.SplitSeq(spec, ",") {
		name, num, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(num)
		if !ok || name == "" || err != nil || n < 0 {
			return nil, fmt.Errorf("-requests: want persona=count, got %q", part)
		}
		out = append(out, count{persona: name, n: n})
	}
	return out, nil
}
