package deployments_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/cli"
	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

var (
	hubConfig      = filepath.Join("nats", "regions", "hub.conf")
	leafConfig     = filepath.Join("nats", "regions", "leaf.conf")
	quarantineAll  = filepath.Join("nats", "regions", "quarantine-all.json")
	leafTestRegion = "eu" // the region quarantine-all.json sources besides the hub
)

// startRegionServer runs one of the regions/ configs in process: listen
// ports random on loopback, store_dir a temp dir, and for the hub the leaf
// port given; for a leaf, its remote pointed at that port.
func startRegionServer(t *testing.T, conf string, leafPort int) *server.Server {
	t.Helper()
	return startConfigServer(t, conf, func(opts *server.Options) {
		if len(opts.LeafNode.Remotes) == 0 {
			opts.LeafNode.Host, opts.LeafNode.Port = "127.0.0.1", leafPort
		}
		for _, r := range opts.LeafNode.Remotes {
			for i, u := range r.URLs {
				moved := *u
				moved.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(leafPort))
				r.URLs[i] = &moved
			}
		}
	})
}

// runReplica runs a replica as the personaq user of c's region until the
// test ends.
func runReplica(t *testing.T, c *client) {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel).With().Str("region", c.user).Logger()
	rt, err := consumers.New(consumers.Config{
		WithoutLedger: true, JetStream: c.js, Personas: testPersonas(), Logger: &log,
		DrainTimeout: 2 * time.Second, FetchMaxWait: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("replica did not stop within 30s")
		}
	})
}

// TestRegionsQuarantineSourcedToHub runs the multi-region topology of
// nats/regions: a hub and one region (a leaf node) from their config files,
// each with its streams provisioned by its admin and a real replica running
// as its least-privilege personaq user. A request published in a region is
// worked there only; a quarantine record written in either region appears
// in the hub's PERSONAQ_QUARANTINE_ALL (quarantine-all.json), which sources
// both across the leaf connection.
func TestRegionsQuarantineSourcedToHub(t *testing.T) {
	leafPort := freeTCPPort(t)
	hub := startRegionServer(t, hubConfig, leafPort)
	t.Setenv("NATS_REGION", leafTestRegion)
	region := startRegionServer(t, leafConfig, leafPort)
	require.Eventually(t, func() bool { return hub.NumLeafNodes() == 1 }, 10*time.Second, 20*time.Millisecond, "the region connects to the hub")

	type site struct{ admin, replica, publisher *client }
	sites := map[string]site{}
	for name, srv := range map[string]*server.Server{"hub": hub, leafTestRegion: region} {
		s := site{admin: dial(t, srv, "admin"), replica: dial(t, srv, "personaq"), publisher: dial(t, srv, "publisher")}
		s.replica.user = name
		provisionAsAdmin(t, s.admin, testPersonas())
		runReplica(t, s.replica)
		sites[name] = s
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, err := os.ReadFile(quarantineAll)
	require.NoError(t, err)
	var cfg jetstream.StreamConfig
	require.NoError(t, json.Unmarshal(raw, &cfg), quarantineAll)
	all, err := sites["hub"].admin.js.CreateStream(ctx, cfg)
	require.NoError(t, err, "the hub's admin creates the aggregate stream")

	rejected := map[string]string{} // request id → region
	worked := map[string]string{}
	for name, s := range sites {
		rejected[publishAs(t, s.publisher, "reject", "task-"+name).RequestID] = name
		worked[publishAs(t, s.publisher, "echo", "task-"+name).RequestID] = name
	}

	// Every region's record, once, in the hub's aggregate.
	got := map[string]string{}
	require.Eventually(t, func() bool {
		info, err := all.Info(ctx)
		if err != nil || info.State.Msgs < uint64(len(rejected)) {
			return false
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
			m, err := all.GetMsg(ctx, seq)
			if err != nil {
				return false
			}
			rec, err := schemas.DecodeQuarantineRecord(m.Data)
			require.NoError(t, err)
			require.Equal(t, "personaq.quarantine.terminal.reject", m.Subject)
			got[rec.RequestID] = rejected[rec.RequestID]
		}
		return len(got) == len(rejected)
	}, 20*time.Second, 50*time.Millisecond, "records in PERSONAQ_QUARANTINE_ALL: %v", got)
	require.Equal(t, rejected, got)
	info, err := all.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(len(rejected)), info.State.Msgs, "one copy of each record")

	// Operators read the aggregate with the CLI at the hub.
	hubURL, err := url.Parse(hub.ClientURL())
	require.NoError(t, err)
	hubURL.User = url.UserPassword("admin", natsPasswords["admin"])
	var out, errOut bytes.Buffer
	code := cli.Run(ctx, []string{"--nats-url", hubURL.String(), "--log-format", "json",
		"quarantine", "ls", "--stream", "PERSONAQ_QUARANTINE_ALL", "-o", "json"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	for id := range rejected {
		require.Contains(t, out.String(), id)
	}

	// Each region worked its own requests and nothing else: one success and
	// one quarantined request in each, every request stream empty.
	for name, s := range sites {
		require.Eventually(t, func() bool {
			return streamMsgs(t, s.admin, "PERSONAQ_REQUESTS") == 0 &&
				len(subjectCounts(t, s.admin, "PERSONAQ_OUTCOMES")) == 2
		}, 20*time.Second, 50*time.Millisecond, "%s works its requests", name)
		require.Equal(t, map[string]uint64{"personaq.quarantine.terminal.reject": 1},
			subjectCounts(t, s.admin, "PERSONAQ_QUARANTINE"), "%s quarantined its own request only", name)
		require.Empty(t, s.replica.errs.violations(), "%s: the replica needs no more permissions", name)
	}
	for id, name := range worked {
		for other, s := range sites {
			_, err := s.admin.js.Stream(ctx, "PERSONAQ_OUTCOMES")
			require.NoError(t, err)
			n := countSubjectsContaining(t, s.admin, wire.RequestKey(id))
			if other == name {
				require.Equal(t, 1, n, "%s's request has its terminal record in %s", name, other)
			} else {
				require.Zero(t, n, "%s's request reached %s", name, other)
			}
		}
	}
}

func countSubjectsContaining(t *testing.T, admin *client, token string) int {
	t.Helper()
	n := 0
	for subj := range subjectCounts(t, admin, "PERSONAQ_OUTCOMES") {
		if len(subj) >= len(token) && subj[len(subj)-len(token):] == token {
			n++
		}
	}
	return n
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	return l.Addr().(*net.TCPAddr).Port
}
