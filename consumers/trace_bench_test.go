package consumers_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/personaq/personaq/consumers"
)

// benchCountingExporter counts the spans it is handed and drops them: the
// cost of the SDK and the batch processor without a network.
type benchCountingExporter struct{ spans atomic.Int64 }

func (e *benchCountingExporter) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	e.spans.Add(int64(len(s)))
	return nil
}

func (*benchCountingExporter) Shutdown(context.Context) error { return nil }

// BenchmarkTracingRatio runs the full pipeline (ledger on) with tracing
// off (the default: a no-op tracer provider) and on (the SDK, every span
// sampled, the batch span processor with its defaults, an exporter that
// drops what it is given) back to back on one server, benchRatioN messages
// each (alternating which runs first), and reports the traced throughput as a fraction of the untraced:
// ratio_on_vs_off. spans_per_msg checks that every delivery was traced
// (one process and one settle span each) and none dropped.
func BenchmarkTracingRatio(b *testing.B) {
	for _, st := range benchStorages {
		b.Run(st.name, func(b *testing.B) {
			e := newBenchEnv(b, true)
			e.storage = st.storage
			var off, on time.Duration
			var spans int64
			runOff := func() {
				off += benchPipeline(b, e, benchRatioN, true, func(c *consumers.Config) {
					c.TracerProvider = noop.NewTracerProvider()
				}).took
			}
			runOn := func() {
				exp := &benchCountingExporter{}
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(exp))
				on += benchPipeline(b, e, benchRatioN, true, func(c *consumers.Config) { c.TracerProvider = tp }).took
				if err := tp.Shutdown(context.Background()); err != nil {
					b.Fatal(err)
				}
				spans += exp.spans.Load()
			}
			for i := range b.N {
				// Alternate which goes first: the server's stream state and
				// the machine's load drift within a run.
				if i%2 == 0 {
					runOff()
					runOn()
				} else {
					runOn()
					runOff()
				}
			}
			n := benchRatioN * b.N
			b.ReportMetric(benchRate(n, off), "tracing_off_msgs/s")
			b.ReportMetric(benchRate(n, on), "tracing_on_msgs/s")
			b.ReportMetric(off.Seconds()/on.Seconds(), "ratio_on_vs_off")
			b.ReportMetric(float64(spans)/float64(n), "spans_per_msg")
		})
	}
}
