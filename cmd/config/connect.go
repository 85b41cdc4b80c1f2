package config

import (
	"crypto/tls"
	"crypto/x509"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
)

// Topology returns the stream and subject names for the runtime.
func (f *File) Topology() wire.Topology {
	t := f.TopologyConfig
	storage := jetstream.FileStorage
	if t.Storage == storageMemory {
		storage = jetstream.MemoryStorage
	}
	return wire.Topology{
		RequestsStream: t.RequestsStream, RequestsPrefix: t.RequestsPrefix,
		QuarantineStream: t.QuarantineStream, QuarantinePrefix: t.QuarantinePrefix,
		OutcomesStream: t.OutcomesStream, OutcomesPrefix: t.OutcomesPrefix,
		Replicas: t.Replicas, Storage: storage,
		DuplicateWindow: t.DuplicateWindow.Std(), OutcomesMaxAge: t.OutcomesMaxAge.Std(),
		OutputsBucket: t.OutputsBucket, InlineOutputMax: t.InlineOutputMax,
		AttemptsStream: t.AttemptsStream, AttemptsPrefix: t.AttemptsPrefix, AttemptsMaxAge: t.AttemptsMaxAge.Std(),
		AttemptsMaxBytes: int64(t.AttemptsMaxBytes),
		Output: wire.OutputTopology{
			Stream: t.OutputStream, Prefix: t.OutputPrefix, MaxAge: t.OutputMaxAge.Std(),
			MaxBytes: int64(t.OutputMaxBytes), AttemptMax: int64(t.OutputAttemptMax),
		},
	}.WithDefaults()
}

// NATSOptions returns the connection options for nats.Connect(f.NATS.URL(),
// opts...): name, endless reconnects, credentials and TLS. Files named by
// the configuration are read now, so a missing or bad one is reported
// naming its field rather than at the first connect.
func (f *File) NATSOptions() ([]nats.Option, error) {
	c := f.NATS
	opts := []nats.Option{nats.Name(c.Name), nats.MaxReconnects(-1)}
	var probs problems
	switch {
	case c.CredsFile != "":
		if err := readable(c.CredsFile); err != nil {
			probs.add("nats.creds_file", "%v", err)
		}
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	case c.NkeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(c.NkeyFile)
		if err != nil {
			probs.add("nats.nkey_file", "%v", err)
		}
		opts = append(opts, opt)
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	if c.TLS.On() {
		// Load now to report problems; nats re-reads the files on each
		// (re)connect, so rotated certificates are picked up.
		if _, err := c.TLS.config("nats.tls"); err != nil {
			probs = append(probs, err)
		}
		opts = append(opts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.TLS.InsecureSkipVerify})) //nolint:gosec // opt-in, documented as testing only
		if c.TLS.CAFile != "" {
			opts = append(opts, nats.RootCAs(c.TLS.CAFile))
		}
		if c.TLS.CertFile != "" {
			opts = append(opts, nats.ClientCert(c.TLS.CertFile, c.TLS.KeyFile))
		}
	}
	if len(probs) > 0 {
		return nil, probs.err()
	}
	return opts, nil
}

// RedisOptions returns the options for redis.NewUniversalClient, or nil
// when no Redis server is configured (the ledger is off): one server from
// url (redis.ParseURL, so its query parameters apply), Redis Cluster from
// addrs, or Sentinel. username, password and db win over the URL's.
func (f *File) RedisOptions() (*redis.UniversalOptions, error) {
	c := f.Redis
	if !c.Enabled() {
		return nil, nil
	}
	o := &redis.UniversalOptions{}
	switch {
	case c.URL != "":
		p, err := redis.ParseURL(c.URL)
		if err != nil {
			var probs problems
			validateRedisURL(c.URL, &probs)
			if len(probs) == 0 {
				probs.add("redis.url", "cannot be used")
			}
			return nil, probs.err()
		}
		o = ledger.Universal(p)
	case c.Sentinel.MasterName != "":
		o.MasterName = c.Sentinel.MasterName
		o.Addrs = append([]string(nil), c.Sentinel.Addrs...)
	default:
		o.Addrs = append([]string(nil), c.Addrs...)
		o.IsClusterMode = true // even with one seed address
	}
	if c.Username != "" {
		o.Username = c.Username
	}
	if c.Password != "" {
		o.Password = c.Password
	}
	if c.DB != 0 {
		o.DB = c.DB
	}
	if c.TLS.On() {
		tc, err := c.TLS.config("redis.tls")
		if err != nil {
			return nil, err
		}
		if o.TLSConfig != nil { // rediss:// set the server name
			tc.ServerName = o.TLSConfig.ServerName
		}
		o.TLSConfig = tc
	}
	return o, nil
}

// config builds a tls.Config, reading the files now; problems name their
// field below path.
func (t TLSConfig) config(path string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // opt-in, testing only
	var probs problems
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		pool := x509.NewCertPool()
		switch {
		case err != nil:
			probs.add(join(path, "ca_file"), "%v", err)
		case !pool.AppendCertsFromPEM(pem):
			probs.add(join(path, "ca_file"), "no PEM certificate in %s", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			probs.add(join(path, "cert_file"), "%v", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if len(probs) > 0 {
		return nil, probs.err()
	}
	return tc, nil
}

func readable(path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	return fh.Close()
}
