package deployments_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/advisory"
	pqclient "github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// natsConfig is the file under test: the single-server example, which
// includes nats/auth.conf.
var natsConfig = filepath.Join("nats", "nats-server.conf")

// startAuthServer runs nats/nats-server.conf in process, only its listen
// ports (random, loopback) and store_dir (a temp dir) overridden.
func startAuthServer(t *testing.T) *server.Server {
	t.Helper()
	return startConfigServer(t, natsConfig, nil)
}

// startConfigServer runs the config file conf in process, its listen
// ports (random, loopback) and store_dir (a temp dir) overridden, and mod
// applied last.
func startConfigServer(t *testing.T, conf string, mod func(*server.Options)) *server.Server {
	t.Helper()
	opts, err := server.ProcessConfigFile(conf)
	require.NoError(t, err, "load %s", conf)
	require.True(t, opts.JetStream, "%s: jetstream must be enabled", conf)
	require.True(t, opts.SyncAlways, "%s: jetstream.sync_interval must be always", conf)
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.HTTPHost, opts.HTTPPort = "127.0.0.1", server.RANDOM_PORT
	opts.StoreDir = t.TempDir()
	opts.NoLog, opts.NoSigs = true, true
	if mod != nil {
		mod(opts)
	}
	srv, err := server.NewServer(opts)
	require.NoError(t, err)
	srv.Start()
	require.True(t, srv.ReadyForConnections(10*time.Second), "nats-server not ready")
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

// client is one user's connection; errs collects the asynchronous errors
// the server sends it (permission violations among them).
type client struct {
	user string
	nc   *nats.Conn
	js   jetstream.JetStream
	errs *errLog
}

type errLog struct {
	mu   sync.Mutex
	errs []string
}

func (l *errLog) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err.Error())
}

func (l *errLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.errs...)
}

// violations lists the permission violations received so far.
func (l *errLog) violations() []string {
	var out []string
	for _, e := range l.all() {
		if strings.Contains(strings.ToLower(e), "permissions violation") {
			out = append(out, e)
		}
	}
	return out
}

func dial(t *testing.T, srv *server.Server, user string) *client {
	t.Helper()
	c := &client{user: user, errs: &errLog{}}
	nc, err := nats.Connect(srv.ClientURL(),
		nats.UserInfo(user, natsPasswords[user]),
		nats.Name("deployments-test-"+user),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { c.errs.add(err) }),
	)
	require.NoError(t, err, "connect as %s", user)
	t.Cleanup(nc.Close)
	c.nc = nc
	c.js, err = jetstream.New(nc)
	require.NoError(t, err)
	// What `personaq serve` and `publish` do first (cmd/cli/connect.go).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = c.js.AccountInfo(ctx)
	require.NoError(t, err, "%s: AccountInfo", user)
	return c
}

// testPolicy retries quickly so the test takes about a second.
func testPolicy() retry.Policy {
	return retry.Policy{
		Name: "perms-test", MaxAttempts: 3, AttemptTimeout: 5 * time.Second,
		Schedule: retry.Fixed{Every: 100 * time.Millisecond}, NetworkDelay: 100 * time.Millisecond,
	}
}

// testPersonas are auth.conf's personas with demo handlers: echo works long
// enough to send InProgress heartbeats (+WPI), flaky fails once (NakWithDelay),
// reject is terminal (quarantine record, then +TERM).
func testPersonas() []consumers.Persona {
	return []consumers.Persona{
		{Name: "echo", Handler: handlers.DemoSucceed(800 * time.Millisecond), Policy: testPolicy(), Concurrency: 4, AckWait: 1500 * time.Millisecond},
		{Name: "flaky", Handler: handlers.DemoFlaky(2, 0), Policy: testPolicy(), Concurrency: 4},
		{Name: "reject", Handler: handlers.DemoTerminal(), Policy: testPolicy(), Concurrency: 4},
	}
}

// provisionAsAdmin is `personaq streams init` run by the admin user.
func provisionAsAdmin(t *testing.T, admin *client, personas []consumers.Persona) {
	t.Helper()
	rt, err := consumers.New(consumers.Config{WithoutLedger: true, JetStream: admin.js, Personas: personas})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, rt.Provision(ctx))
}

func publishAs(t *testing.T, c *client, persona, task string) *schemas.PersonaRequest {
	t.Helper()
	req := schemas.NewRequest(task, "main", persona)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := wire.PublishRequest(ctx, c.js, wire.Topology{}, req)
	require.NoError(t, err, "%s publishes a %s request", c.user, persona)
	return req
}

// subjectCounts is how many messages of stream are on each subject.
func subjectCounts(t *testing.T, admin *client, stream string) map[string]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := admin.js.Stream(ctx, stream)
	require.NoError(t, err)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
	require.NoError(t, err)
	if info.State.Subjects == nil {
		return map[string]uint64{}
	}
	return info.State.Subjects
}

func streamMsgs(t *testing.T, admin *client, stream string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := admin.js.Stream(ctx, stream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	return info.State.Msgs
}

// startListener starts the MAX_DELIVERIES listener a replica runs beside
// its runtime, as c's user; it stops when the test ends.
func startListener(t *testing.T, ctx context.Context, c *client, log *zerolog.Logger) *advisory.Listener {
	t.Helper()
	w := dlq.NewWriter(c.js, dlq.QuarantineSubjects(schemas.DefaultQuarantinePrefix))
	l, err := advisory.NewListener(advisory.Config{
		JetStream: c.js, Writer: w, AckWait: 2 * time.Second, SweepInterval: -1, Logger: log,
	})
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx), "the listener provisions its advisory stream and starts")
	t.Cleanup(l.Stop)
	return l
}

// TestNATSPermissionsReplicaRunsEndToEnd runs a real replica (consumers.New
// + Run, and the dlq MAX_DELIVERIES listener beside it) as the
// least-privilege personaq user: a request that succeeds, one that is
// retried once (NakWithDelay), and one that is terminal and ends on the
// quarantine stream (the writer creating its KV index on first use) — and
// the server reports no permission violation.
func TestNATSPermissionsReplicaRunsEndToEnd(t *testing.T) {
	t.Parallel() // a server of its own on random ports
	srv := startAuthServer(t)
	admin, replicaUser, publisher := dial(t, srv, "admin"), dial(t, srv, "personaq"), dial(t, srv, "publisher")
	provisionAsAdmin(t, admin, testPersonas())

	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	rt, err := consumers.New(consumers.Config{
		WithoutLedger: true, JetStream: replicaUser.js, Personas: testPersonas(), Logger: &log, Topology: outputsOutOfLine,
		DrainTimeout: 2 * time.Second, FetchMaxWait: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	startListener(t, ctx, replicaUser, &log)
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("replica did not stop within 30s")
		}
	}
	t.Cleanup(func() { _ = stop() })

	echo := publishAs(t, publisher, "echo", "task-echo")
	flaky := publishAs(t, publisher, "flaky", "task-flaky")
	reject := publishAs(t, publisher, "reject", "task-reject")
	// A body too large to keep inside a quarantine record: the replica
	// stores it in the quarantine payloads object store.
	big := bytes.Repeat([]byte{0xff, 'x'}, 300<<10)
	pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = publisher.js.Publish(pctx, "personaq.requests.reject", big)
	pcancel()
	require.NoError(t, err)

	wantOutcomes := map[string]uint64{
		"personaq.outcomes.succeeded.echo":     1,
		"personaq.outcomes.succeeded.flaky":    1,
		"personaq.outcomes.quarantined.reject": 2,
	}
	var got map[string]uint64
	require.Eventually(t, func() bool {
		got = withoutRequestKey(subjectCounts(t, admin, "PERSONAQ_OUTCOMES"))
		return len(got) == len(wantOutcomes) && streamMsgs(t, admin, "PERSONAQ_REQUESTS") == 0
	}, 20*time.Second, 50*time.Millisecond, "outcomes never complete; last: %v; replica errors: %v", got, replicaUser.errs.all())
	require.Equal(t, wantOutcomes, got)
	require.NoError(t, stop(), "Run returns cleanly after a drain")

	require.Equal(t, map[string]uint64{"personaq.quarantine.terminal.reject": 1, "personaq.quarantine.invalid_message.reject": 1},
		subjectCounts(t, admin, "PERSONAQ_QUARANTINE"))
	for seq := uint64(1); seq <= 2; seq++ {
		rec := readQuarantine(t, admin, seq)
		switch rec.Reason {
		case schemas.ReasonTerminal:
			require.Equal(t, reject.RequestID, rec.RequestID)
		case schemas.ReasonInvalidMessage:
			require.NotNil(t, rec.PayloadRef, "the large body is kept out of line")
			require.EqualValues(t, len(big), rec.PayloadRef.Size)
		default:
			t.Fatalf("unexpected record %s", rec.Reason)
		}
	}

	// The publisher awaits a result: the terminal record and the output
	// (kept in the object store here), and follows attempt events.
	pc, err := pqclient.New(pqclient.Config{JetStream: publisher.js, Topology: outputsOutOfLine})
	require.NoError(t, err)
	actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer acancel()
	res, err := pc.Await(actx, echo.RequestID, pqclient.OnAttempt(func(*schemas.AttemptEvent) {}))
	require.NoError(t, err)
	require.NotNil(t, res.Record.OutputRef, "output kept out of line")
	require.NotEmpty(t, res.Output)
	_, err = pc.Budget(actx, schemas.NewRequest("t", "main", "flaky"))
	require.NoError(t, err)

	events := readOutcomes(t, admin)
	require.Equal(t, 1, events[echo.RequestID].Attempts)
	require.Equal(t, 2, events[flaky.RequestID].Attempts, "flaky: one NakWithDelay, then success")
	require.Equal(t, schemas.OutcomeQuarantined, events[reject.RequestID].Outcome)

	require.Empty(t, replicaUser.errs.violations(), "the replica needed a subject auth.conf does not grant")
	require.Empty(t, publisher.errs.violations())
}

// outputsOutOfLine keeps every output over one byte in the object store,
// so the test exercises both users' object store permissions.
var outputsOutOfLine = wire.Topology{InlineOutputMax: 1}

// withoutRequestKey counts terminal records by outcome and persona.
func withoutRequestKey(counts map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for subj, n := range counts {
		out[subj[:strings.LastIndex(subj, ".")]] += n
	}
	return out
}

// TestNATSPermissionsMaxDeliveries: a replica crashes holding a message
// (fetched as the personaq user, never acked) of a consumer with MaxDeliver
// 1; the real advisory.Listener, also as the personaq user, moves it to
// the quarantine with reason max_deliveries and deletes it from the work
// queue.
func TestNATSPermissionsMaxDeliveries(t *testing.T) {
	t.Parallel() // a server of its own on random ports
	srv := startAuthServer(t)
	admin, replicaUser, publisher := dial(t, srv, "admin"), dial(t, srv, "personaq"), dial(t, srv, "publisher")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, consumers.Provision(ctx, admin.js, wire.Topology{}, []consumers.ConsumerSpec{
		{Persona: "flaky", AckWait: 300 * time.Millisecond, MaxAckPending: 10, MaxDeliver: 1},
	}))
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	startListener(t, ctx, replicaUser, &log)
	req := publishAs(t, publisher, "flaky", "task-crash")

	cons, err := replicaUser.js.Consumer(ctx, "PERSONAQ_REQUESTS", "personaq-flaky")
	require.NoError(t, err)
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	require.NoError(t, err)
	n := 0
	for range batch.Messages() {
		n++ // never acked: the replica "crashed"
	}
	require.Equal(t, 1, n)

	// A pull after AckWait makes the server notice the delivery limit and
	// raise the advisory; the listener does the rest.
	require.Eventually(t, func() bool {
		if b, err := cons.Fetch(1, jetstream.FetchMaxWait(200*time.Millisecond)); err == nil {
			for range b.Messages() {
			}
		}
		return subjectCounts(t, admin, "PERSONAQ_QUARANTINE")["personaq.quarantine.max_deliveries.flaky"] == 1
	}, 20*time.Second, 50*time.Millisecond, "no max_deliveries record; replica errors: %v", replicaUser.errs.all())
	rec := readQuarantine(t, admin, 1)
	require.Equal(t, req.RequestID, rec.RequestID, "the record keeps the payload's identity")
	require.Equal(t, schemas.ReasonMaxDeliveries, rec.Reason)
	require.Eventually(t, func() bool { return streamMsgs(t, admin, "PERSONAQ_REQUESTS") == 0 },
		5*time.Second, 20*time.Millisecond, "deleted from the work queue")
	require.Empty(t, replicaUser.errs.violations())
}

// TestNATSPermissionsQuarantineSearch makes, as the personaq user, the calls
// dlq's writer makes when it searches the quarantine for a record whose
// writer died between publishing and indexing it (dlq/scan.go: an
// ephemeral AckNone consumer filtered on the record's subject, pulled, then
// deleted). It is rare, so the end-to-end run does not reach it.
func TestNATSPermissionsQuarantineSearch(t *testing.T) {
	t.Parallel() // a server of its own on random ports
	srv := startAuthServer(t)
	admin, replicaUser := dial(t, srv, "admin"), dial(t, srv, "personaq")
	provisionAsAdmin(t, admin, testPersonas())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const subject = "personaq.quarantine.terminal.reject"
	_, err := replicaUser.js.Publish(ctx, subject, []byte(`{}`), jetstream.WithMsgID("q.PERSONAQ_REQUESTS.7"))
	require.NoError(t, err)

	stream, err := replicaUser.js.StreamNameBySubject(ctx, subject)
	require.NoError(t, err)
	require.Equal(t, "PERSONAQ_QUARANTINE", stream)
	cons, err := replicaUser.js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		AckPolicy: jetstream.AckNonePolicy, HeadersOnly: true, InactiveThreshold: 30 * time.Second,
		MemoryStorage: true, FilterSubject: subject,
	})
	require.NoError(t, err)
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	require.NoError(t, err)
	var ids []string
	for m := range batch.Messages() {
		ids = append(ids, m.Headers().Get(jetstream.MsgIDHeader))
	}
	require.Equal(t, []string{"q.PERSONAQ_REQUESTS.7"}, ids)
	require.NoError(t, replicaUser.js.DeleteConsumer(ctx, stream, cons.CachedInfo().Name))
	require.Empty(t, replicaUser.errs.violations())
}

// refusal is one thing a user must not be able to do.
type refusal struct {
	name    string
	subject string // the subject the server must name in its violation
	op      func(ctx context.Context, c *client) error
	// intact checks, as admin, that nothing happened.
	intact func(t *testing.T, admin *client)
}

func requestsEmpty(t *testing.T, admin *client) {
	t.Helper()
	require.Zero(t, streamMsgs(t, admin, "PERSONAQ_REQUESTS"))
}

func streamsIntact(t *testing.T, admin *client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var names []string
	for n := range admin.js.StreamNames(ctx).Name() {
		names = append(names, n)
	}
	require.ElementsMatch(t, []string{"PERSONAQ_REQUESTS", "PERSONAQ_QUARANTINE", "PERSONAQ_OUTCOMES", "PERSONAQ_ATTEMPTS", "PERSONAQ_OUTPUT", "OBJ_PERSONAQ_OUTPUTS"}, names)
}

func consumersIntact(t *testing.T, admin *client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := admin.js.Stream(ctx, "PERSONAQ_REQUESTS")
	require.NoError(t, err)
	var names []string
	for n := range s.ConsumerNames(ctx).Name() {
		names = append(names, n)
	}
	require.ElementsMatch(t, []string{"personaq-echo", "personaq-flaky", "personaq-reject"}, names)
}

func publishOp(subject string) func(context.Context, *client) error {
	return func(ctx context.Context, c *client) error {
		_, err := c.js.Publish(ctx, subject, []byte(`{}`))
		return err
	}
}

func TestNATSPermissionsReplicaRefused(t *testing.T) {
	t.Parallel() // a server of its own on random ports
	srv := startAuthServer(t)
	admin := dial(t, srv, "admin")
	provisionAsAdmin(t, admin, testPersonas())
	runRefusals(t, srv, admin, "personaq", []refusal{
		{"PublishRequest", "personaq.requests.x", publishOp("personaq.requests.x"), requestsEmpty},
		{"DeleteStream", "$JS.API.STREAM.DELETE.PERSONAQ_REQUESTS", func(ctx context.Context, c *client) error {
			return c.js.DeleteStream(ctx, "PERSONAQ_REQUESTS")
		}, streamsIntact},
		{"CreateStream", "$JS.API.STREAM.CREATE.SNEAKY", func(ctx context.Context, c *client) error {
			_, err := c.js.CreateStream(ctx, jetstream.StreamConfig{Name: "SNEAKY", Subjects: []string{"sneaky.>"}})
			return err
		}, streamsIntact},
		// The requests stream's purge is granted (the trim of acked
		// requests); the terminal records' is not.
		{"PurgeStream", "$JS.API.STREAM.PURGE.PERSONAQ_OUTCOMES", func(ctx context.Context, c *client) error {
			s, err := c.js.Stream(ctx, "PERSONAQ_OUTCOMES") // STREAM.INFO is granted (records read back)
			if err != nil {
				return err
			}
			return s.Purge(ctx)
		}, streamsIntact},
		{"ReadQuarantine", "$JS.API.STREAM.INFO.PERSONAQ_QUARANTINE", func(ctx context.Context, c *client) error {
			_, err := c.js.Stream(ctx, "PERSONAQ_QUARANTINE")
			return err
		}, nil},
		{"DeleteConsumer", "$JS.API.CONSUMER.DELETE.PERSONAQ_REQUESTS.personaq-echo", func(ctx context.Context, c *client) error {
			return c.js.DeleteConsumer(ctx, "PERSONAQ_REQUESTS", "personaq-echo")
		}, consumersIntact},
		{"CreateOtherConsumer", "$JS.API.CONSUMER.CREATE.PERSONAQ_REQUESTS.sneaky.personaq.requests.echo", func(ctx context.Context, c *client) error {
			_, err := c.js.CreateOrUpdateConsumer(ctx, "PERSONAQ_REQUESTS", jetstream.ConsumerConfig{
				Durable: "sneaky", FilterSubject: "personaq.requests.echo", AckPolicy: jetstream.AckExplicitPolicy,
			})
			return err
		}, consumersIntact},
		{"PullUnlistedPersona", "$JS.API.CONSUMER.INFO.PERSONAQ_REQUESTS.personaq-planner", func(ctx context.Context, c *client) error {
			_, err := c.js.Consumer(ctx, "PERSONAQ_REQUESTS", "personaq-planner")
			return err
		}, nil},
		{"SubscribeRequests", "personaq.requests.>", func(_ context.Context, c *client) error {
			_, err := c.nc.SubscribeSync("personaq.requests.>")
			if err != nil {
				return err
			}
			// The refusal is asynchronous; report it as the operation's error.
			return c.nc.Flush()
		}, nil},
	})
}

func TestNATSPermissionsPublisherRefused(t *testing.T) {
	t.Parallel() // a server of its own on random ports
	srv := startAuthServer(t)
	admin := dial(t, srv, "admin")
	provisionAsAdmin(t, admin, testPersonas())
	runRefusals(t, srv, admin, "publisher", []refusal{
		{"PublishOutcome", "personaq.outcomes.succeeded.echo", publishOp("personaq.outcomes.succeeded.echo"), nil},
		{"PublishQuarantine", "personaq.quarantine.terminal.echo", publishOp("personaq.quarantine.terminal.echo"), nil},
		{"PullRequests", "$JS.API.CONSUMER.MSG.NEXT.PERSONAQ_REQUESTS.personaq-echo", func(ctx context.Context, c *client) error {
			cons, err := c.js.Consumer(ctx, "PERSONAQ_REQUESTS", "personaq-echo") // reading its policy is allowed
			if err != nil {
				return err
			}
			_, err = cons.Next(jetstream.FetchMaxWait(500 * time.Millisecond))
			return err
		}, nil},
		{"DeleteStream", "$JS.API.STREAM.DELETE.PERSONAQ_REQUESTS", func(ctx context.Context, c *client) error {
			return c.js.DeleteStream(ctx, "PERSONAQ_REQUESTS")
		}, streamsIntact},
	})
}

// runRefusals runs each case on a fresh connection of user, expecting the
// operation to fail, the server to name the subject in a permissions
// violation, and (as admin) nothing to have changed.
func runRefusals(t *testing.T, srv *server.Server, admin *client, user string, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := dial(t, srv, user)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := tc.op(ctx, c)
			want := `"` + tc.subject + `"`
			require.Eventually(t, func() bool {
				for _, v := range c.errs.violations() {
					if strings.Contains(v, want) {
						return true
					}
				}
				return false
			}, 5*time.Second, 10*time.Millisecond, "no permissions violation naming %s; errors: %v (op: %v)", want, c.errs.all(), err)
			if !strings.HasPrefix(tc.name, "Subscribe") {
				require.Error(t, err, "a refused request cannot succeed")
			}
			if tc.intact != nil {
				tc.intact(t, admin)
			}
		})
	}
}

func readQuarantine(t *testing.T, admin *client, seq uint64) *schemas.QuarantineRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := admin.js.Stream(ctx, "PERSONAQ_QUARANTINE")
	require.NoError(t, err)
	raw, err := s.GetMsg(ctx, seq)
	require.NoError(t, err)
	rec, err := schemas.DecodeQuarantineRecord(raw.Data)
	require.NoError(t, err)
	return rec
}

// readOutcomes returns every outcome event by request id.
func readOutcomes(t *testing.T, admin *client) map[string]*schemas.OutcomeEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := admin.js.Stream(ctx, "PERSONAQ_OUTCOMES")
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	out := map[string]*schemas.OutcomeEvent{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		raw, err := s.GetMsg(ctx, seq)
		require.NoError(t, err)
		ev, err := schemas.DecodeOutcome(raw.Data)
		require.NoError(t, err)
		out[ev.RequestID] = ev
	}
	return out
}
