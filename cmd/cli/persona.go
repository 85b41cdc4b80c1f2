package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/flow"
	"github.com/personaq/personaq/consumers/wire"
)

func init() { register(newPersonaCmd) }

// pauseForever is how far ahead a pause without --until is set: the server
// needs a date, and "until resumed" is what the operator means.
const pauseForever = 100 * 365 * 24 * time.Hour

// errPauseUnsupported: the server predates the consumer pause API.
var errPauseUnsupported = errors.New("consumer pause needs nats-server 2.11 or newer")

func newPersonaCmd(g *globals) *cobra.Command {
	var stream string
	cmd := &cobra.Command{
		Use:   "persona",
		Short: "Pause, resume and list personas across every replica (their shared durable consumers)",
	}
	cmd.PersistentFlags().StringVar(&stream, "stream", wire.Topology{}.WithDefaults().RequestsStream, "requests stream (topology.requests_stream)")
	cmd.AddCommand(newPersonaPauseCmd(g, &stream), newPersonaResumeCmd(g, &stream), newPersonaLsCmd(g, &stream))
	return cmd
}

func newPersonaPauseCmd(g *globals, stream *string) *cobra.Command {
	var until string
	cmd := &cobra.Command{
		Use:   "pause PERSONA [--until 30m|2026-01-02T15:04:05Z]",
		Short: "Stop delivering a persona's requests to every replica (in-flight attempts finish)",
		Long: `pause uses the server's consumer pause (nats-server 2.11 or newer) on the
persona's durable consumer, which every replica shares: no replica receives
its requests until the pause ends or 'persona resume' is run. Replicas keep
running, attempts already in flight finish and are settled, and requests
published meanwhile wait in the stream.

--until takes a duration from now (30m, 2h) or an RFC3339 time. Without it
the persona stays paused until resumed (the server is given a date 100
years ahead).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			at, err := parseUntil(until, time.Now())
			if err != nil {
				return err
			}
			return withJetStream(cmd.Context(), g, func(nc *nats.Conn, js jetstream.JetStream) error {
				return pausePersona(cmd.Context(), g.stdout, nc, js, *stream, args[0], at, until == "")
			})
		},
	}
	cmd.Flags().StringVar(&until, "until", "", "pause for a duration (30m) or until an RFC3339 time (default: until resumed)")
	return cmd
}

func newPersonaResumeCmd(g *globals, stream *string) *cobra.Command {
	return &cobra.Command{
		Use:   "resume PERSONA",
		Short: "Resume delivering a paused persona's requests",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withJetStream(cmd.Context(), g, func(nc *nats.Conn, js jetstream.JetStream) error {
				return resumePersona(cmd.Context(), g.stdout, nc, js, *stream, args[0])
			})
		},
	}
}

func newPersonaLsCmd(g *globals, stream *string) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List personas: pending, in flight, redelivered, paused, pull requests waiting",
		Long: `ls lists every persona consumer (durable personaq-*) on the requests stream:

  PENDING      requests not yet delivered (NumPending)
  IN FLIGHT    delivered and not yet acknowledged, across replicas (NumAckPending)
  REDELIVERED  delivered more than once and not yet acknowledged (NumRedelivered)
  PAUSED       whether deliveries are paused, and until when
  PULLS        pull requests waiting from replicas (NumWaiting): a proxy for
               bound replicas; a replica whose slots are all busy has none
  LIMITER      the shared rate limiter its pulls take permits from (- none)
  CIRCUIT      its circuit breaker: closed, open until a time (after how many
               failures), half-open (one probe decides), or off. The state is
               read from Redis (--redis-url, REDIS_URL, or a running dev's);
               without it, "on" says only that a breaker is configured`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("invalid flag --output: %q (want text|json)", output)
			}
			return withJetStream(cmd.Context(), g, func(_ *nats.Conn, js jetstream.JetStream) error {
				views, err := listPersonas(cmd.Context(), js, *stream)
				if err != nil {
					return err
				}
				addCircuitStates(cmd.Context(), g, views)
				return writePersonas(g.stdout, output, views)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output: text|json")
	return cmd
}

func withJetStream(ctx context.Context, g *globals, fn func(*nats.Conn, jetstream.JetStream) error) error {
	nc, js, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	return fn(nc, js)
}

// parseUntil reads --until: empty is "until resumed", else a positive
// duration from now or an RFC3339 time in the future.
func parseUntil(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return now.Add(pauseForever).UTC(), nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("invalid flag --until: %q (want a positive duration)", s)
		}
		return now.Add(d).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid flag --until: %q (want a duration like 30m or an RFC3339 time like 2026-01-02T15:04:05Z)", s)
	}
	if !t.After(now) {
		return time.Time{}, fmt.Errorf("invalid flag --until: %s is not in the future", s)
	}
	return t.UTC(), nil
}

// personaConsumer checks that persona has a consumer on stream, naming the
// known personas when it has not.
func personaConsumer(ctx context.Context, js jetstream.JetStream, stream, persona string) (string, error) {
	durable := wire.Durable(persona)
	_, err := js.Consumer(ctx, stream, durable)
	switch {
	case err == nil:
		return durable, nil
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return "", fmt.Errorf("stream %s not found: has a replica run yet? (or pass --stream)", stream)
	case errors.Is(err, jetstream.ErrConsumerNotFound), errors.Is(err, jetstream.ErrInvalidConsumerName):
		known, lerr := personaNames(ctx, js, stream)
		if lerr != nil {
			return "", fmt.Errorf("unknown persona %q: no consumer %s on stream %s", persona, durable, stream)
		}
		return "", fmt.Errorf("unknown persona %q: no consumer %s on stream %s (known: %s)", persona, durable, stream, orNone(known))
	}
	return "", fmt.Errorf("consumer %s on %s: %w", durable, stream, err)
}

func pausePersona(ctx context.Context, w io.Writer, nc *nats.Conn, js jetstream.JetStream, stream, persona string, until time.Time, forever bool) error {
	durable, err := personaConsumer(ctx, js, stream, persona)
	if err != nil {
		return err
	}
	resp, err := js.PauseConsumer(ctx, stream, durable, until)
	if err = pauseError(nc, resp, err, true); err != nil {
		return fmt.Errorf("pause %s: %w", durable, err)
	}
	when := "until " + resp.PauseUntil.UTC().Format(time.RFC3339) + " (" + resp.PauseRemaining.Round(time.Second).String() + ")"
	if forever {
		when = "until resumed"
	}
	fmt.Fprintf(w, "paused persona %s (consumer %s on %s) %s: no replica receives its requests; attempts in flight finish\n",
		persona, durable, stream, when)
	return nil
}

func resumePersona(ctx context.Context, w io.Writer, nc *nats.Conn, js jetstream.JetStream, stream, persona string) error {
	durable, err := personaConsumer(ctx, js, stream, persona)
	if err != nil {
		return err
	}
	resp, err := js.ResumeConsumer(ctx, stream, durable)
	if err = pauseError(nc, resp, err, false); err != nil {
		return fmt.Errorf("resume %s: %w", durable, err)
	}
	fmt.Fprintf(w, "resumed persona %s (consumer %s on %s)\n", persona, durable, stream)
	return nil
}

// pauseError turns what an older server answers into errPauseUnsupported:
// a server without the pause API answers "bad request" (nothing listens on
// its subject), and one that ignored the request reports no pause.
func pauseError(nc *nats.Conn, resp *jetstream.ConsumerPauseResponse, err error, pausing bool) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeBadRequest:
		return unsupported(nc)
	case err != nil:
		return err
	case pausing && (!resp.Paused || resp.PauseUntil.IsZero()):
		return unsupported(nc)
	}
	return nil
}

func unsupported(nc *nats.Conn) error {
	if v := nc.ConnectedServerVersion(); v != "" {
		return fmt.Errorf("%w (connected to nats-server %s)", errPauseUnsupported, v)
	}
	return errPauseUnsupported
}

// personaView is one line of `persona ls`.
type personaView struct {
	Persona          string     `json:"persona"`
	Consumer         string     `json:"consumer"`
	Pending          uint64     `json:"pending"`
	InFlight         int        `json:"inFlight"`
	Redelivered      int        `json:"redelivered"`
	Paused           bool       `json:"paused"`
	PauseUntil       *time.Time `json:"pauseUntil,omitempty"`
	PauseRemainingMs int64      `json:"pauseRemainingMs,omitempty"`
	WaitingPulls     int        `json:"waitingPulls"`
	PushBound        bool       `json:"pushBound,omitempty"`
	// Unserved: requests wait on this persona's subject but no replica
	// serves it (Consumer is empty); Oldest is when the first was stored.
	Unserved bool       `json:"unserved,omitempty"`
	Oldest   *time.Time `json:"oldest,omitempty"`
	// Limiter is the rate limiter it takes permits from ("" none).
	Limiter string `json:"limiter,omitempty"`
	// Breaker is its circuit breaker as "failures/cool-down" ("" none);
	// Circuit its state (closed, open, half-open; "" unknown without Redis).
	Breaker         string     `json:"breaker,omitempty"`
	Circuit         string     `json:"circuit,omitempty"`
	CircuitUntil    *time.Time `json:"circuitUntil,omitempty"`
	CircuitFailures int        `json:"circuitFailures,omitempty"`
}

func listPersonas(ctx context.Context, js jetstream.JetStream, stream string) ([]personaView, error) {
	s, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("stream %s not found: has a replica run yet? (or pass --stream)", stream)
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	views := []personaView{}
	lister := s.ListConsumers(ctx)
	for info := range lister.Info() {
		persona, ok := strings.CutPrefix(info.Name, wire.Durable(""))
		if !ok {
			continue
		}
		v := personaView{
			Persona: persona, Consumer: info.Name, Pending: info.NumPending,
			InFlight: info.NumAckPending, Redelivered: info.NumRedelivered,
			Paused: info.Paused, WaitingPulls: info.NumWaiting, PushBound: info.PushBound,
		}
		v.Limiter, v.Breaker = consumers.FlowInfo(info.Config.Metadata)
		if info.Paused && info.Config.PauseUntil != nil {
			u := info.Config.PauseUntil.UTC()
			v.PauseUntil, v.PauseRemainingMs = &u, info.PauseRemaining.Milliseconds()
		}
		views = append(views, v)
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("list consumers of %s: %w", stream, err)
	}
	unserved, err := wire.UnservedRequests(ctx, js, wire.Topology{RequestsStream: stream})
	if err != nil {
		return nil, err
	}
	for _, u := range unserved {
		oldest := u.Oldest.UTC()
		views = append(views, personaView{Persona: u.Persona, Pending: u.Pending, Unserved: true, Oldest: &oldest})
	}
	slices.SortFunc(views, func(a, b personaView) int { return strings.Compare(a.Persona, b.Persona) })
	return views, nil
}

func personaNames(ctx context.Context, js jetstream.JetStream, stream string) ([]string, error) {
	views, err := listPersonas(ctx, js, stream)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, v := range views {
		if !v.Unserved {
			names = append(names, v.Persona)
		}
	}
	return names, nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func writePersonas(w io.Writer, output string, views []personaView) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(views)
	}
	if len(views) == 0 {
		_, err := fmt.Fprintln(w, "no persona consumers yet (they are created when a replica starts)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PERSONA\tPENDING\tIN FLIGHT\tREDELIVERED\tPAUSED\tPULLS\tLIMITER\tCIRCUIT")
	for _, v := range views {
		if v.Unserved {
			fmt.Fprintf(tw, "%s\t%d\t-\t-\tNOT SERVED: no replica runs it; oldest waiting %s\t-\t-\t-\n", v.Persona, v.Pending, time.Since(*v.Oldest).Round(time.Second))
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", v.Persona, v.Pending, v.InFlight, v.Redelivered, pausedText(v), pullsText(v),
			orDash(v.Limiter), circuitText(v))
	}
	return tw.Flush()
}

func pausedText(v personaView) string {
	switch {
	case !v.Paused:
		return "no"
	case v.PauseUntil == nil:
		return "yes"
	case time.Duration(v.PauseRemainingMs)*time.Millisecond > pauseForever/2:
		return "until resumed"
	}
	left := (time.Duration(v.PauseRemainingMs) * time.Millisecond).Round(time.Second)
	return fmt.Sprintf("until %s (%s left)", v.PauseUntil.Format(time.RFC3339), left)
}

func pullsText(v personaView) string {
	if v.PushBound {
		return fmt.Sprintf("%d (push bound)", v.WaitingPulls)
	}
	return fmt.Sprint(v.WaitingPulls)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func circuitText(v personaView) string {
	switch {
	case v.Breaker == "":
		return "off"
	case v.Circuit == "":
		return "on"
	case v.Circuit == flow.Open.String() && v.CircuitUntil != nil:
		return fmt.Sprintf("open until %s (%d failures)", v.CircuitUntil.Format(time.RFC3339), v.CircuitFailures)
	}
	return v.Circuit
}

// addCircuitStates reads the circuit state of every persona with a breaker
// from Redis, when one is known (--redis-url, REDIS_URL or a running dev's
// ledger); without one the states stay unknown.
func addCircuitStates(ctx context.Context, g *globals, views []personaView) {
	url := g.redisURL
	if url == "" {
		url, _ = devLedgerURL(ctx, g)
	}
	opts, err := redis.ParseURL(url)
	if url == "" || err != nil {
		return
	}
	client := redis.NewClient(opts)
	defer client.Close()
	circuits, err := flow.NewCircuits(client, "")
	if err != nil {
		return
	}
	for i := range views {
		v := &views[i]
		if v.Breaker == "" {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := circuits.Status(cctx, v.Persona)
		cancel()
		if err != nil {
			return
		}
		v.Circuit, v.CircuitFailures = st.State.String(), st.Failures
		if st.State == flow.Open {
			u := st.Until.UTC().Truncate(time.Second)
			v.CircuitUntil = &u
		}
	}
}
