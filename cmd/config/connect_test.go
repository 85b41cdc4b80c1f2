package config_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/config"
	"github.com/personaq/personaq/consumers/wire"
)

// tlsFiles writes a self-signed certificate and its key, usable both as a
// CA bundle and as a client certificate.
func tlsFiles(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "personaq-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}

// applied applies opts to nats's default options, as nats.Connect does.
func applied(t *testing.T, opts []nats.Option) nats.Options {
	t.Helper()
	o := nats.GetDefaultOptions()
	for _, opt := range opts {
		require.NoError(t, opt(&o))
	}
	return o
}

func TestNATSOptions(t *testing.T) {
	t.Parallel()
	cert, key := tlsFiles(t)
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	seed, err := kp.Seed()
	require.NoError(t, err)
	nkeyFile := writeFile(t, "user.nk", string(seed))
	credsFile := writeFile(t, "user.creds", "not parsed until connect")

	t.Run("UserPassword", func(t *testing.T) {
		t.Parallel()
		f := mustParse(t, "nats: {name: w1, user: u, password: pw}\n"+dedent(echoOnly), nil)
		opts, err := f.NATSOptions()
		require.NoError(t, err)
		o := applied(t, opts)
		require.Equal(t, "w1", o.Name)
		require.Equal(t, -1, o.MaxReconnect)
		require.Equal(t, "u", o.User)
		require.Equal(t, "pw", o.Password)
		require.False(t, o.Secure)
	})
	t.Run("Token", func(t *testing.T) {
		t.Parallel()
		f := mustParse(t, echoOnly, map[string]string{"PERSONAQ_NATS_TOKEN": "tok"})
		opts, err := f.NATSOptions()
		require.NoError(t, err)
		require.Equal(t, "tok", applied(t, opts).Token)
	})
	t.Run("NkeyFile", func(t *testing.T) {
		t.Parallel()
		f := mustParse(t, echoOnly, map[string]string{"PERSONAQ_NATS_NKEY_FILE": nkeyFile})
		opts, err := f.NATSOptions()
		require.NoError(t, err)
		o := applied(t, opts)
		pub, err := kp.PublicKey()
		require.NoError(t, err)
		require.Equal(t, pub, o.Nkey)
		require.NotNil(t, o.SignatureCB)
	})
	t.Run("CredsFile", func(t *testing.T) {
		t.Parallel()
		f := mustParse(t, echoOnly, map[string]string{"PERSONAQ_NATS_CREDS_FILE": credsFile})
		opts, err := f.NATSOptions()
		require.NoError(t, err)
		o := applied(t, opts)
		require.NotNil(t, o.UserJWT)
		require.NotNil(t, o.SignatureCB)
	})
	t.Run("TLS", func(t *testing.T) {
		t.Parallel()
		f := mustParse(t, echoOnly, map[string]string{
			"PERSONAQ_NATS_TLS_CA_FILE": cert, "PERSONAQ_NATS_TLS_CERT_FILE": cert, "PERSONAQ_NATS_TLS_KEY_FILE": key,
		})
		opts, err := f.NATSOptions()
		require.NoError(t, err)
		o := applied(t, opts)
		require.True(t, o.Secure)
		require.NotNil(t, o.TLSConfig)
		require.False(t, o.TLSConfig.InsecureSkipVerify)
		require.NotNil(t, o.RootCAsCB)
		require.NotNil(t, o.TLSCertCB)
	})
	t.Run("TLSInsecure", func(t *testing.T) {
		t.Parallel()
		f := mustParse(t, echoOnly, map[string]string{"PERSONAQ_NATS_TLS_INSECURE_SKIP_VERIFY": "true"})
		opts, err := f.NATSOptions()
		require.NoError(t, err)
		o := applied(t, opts)
		require.True(t, o.Secure)
		require.True(t, o.TLSConfig.InsecureSkipVerify)
	})
	t.Run("BadFilesNameTheirField", func(t *testing.T) {
		t.Parallel()
		notPEM := writeFile(t, "ca.pem", "hello")
		tests := []struct {
			name  string
			env   map[string]string
			field string
		}{
			{"MissingNkey", map[string]string{"PERSONAQ_NATS_NKEY_FILE": "/nonexistent/user.nk"}, "nats.nkey_file: "},
			{"MissingCreds", map[string]string{"PERSONAQ_NATS_CREDS_FILE": "/nonexistent/user.creds"}, "nats.creds_file: "},
			{"MissingCA", map[string]string{"PERSONAQ_NATS_TLS_CA_FILE": "/nonexistent/ca.pem"}, "nats.tls.ca_file: "},
			{"CANotPEM", map[string]string{"PERSONAQ_NATS_TLS_CA_FILE": notPEM}, "nats.tls.ca_file: no PEM certificate"},
			{"BadKeyPair", map[string]string{"PERSONAQ_NATS_TLS_CERT_FILE": cert, "PERSONAQ_NATS_TLS_KEY_FILE": notPEM}, "nats.tls.cert_file: "},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				f := mustParse(t, echoOnly, tt.env)
				_, err := f.NATSOptions()
				require.ErrorIs(t, err, config.ErrInvalid)
				require.ErrorContains(t, err, "invalid config: "+tt.field)
			})
		}
	})
}

func TestRedisOptions(t *testing.T) {
	t.Parallel()
	cert, _ := tlsFiles(t)
	tests := []struct {
		name   string
		env    map[string]string
		want   func(t *testing.T, o *redis.UniversalOptions)
		client any
	}{
		{
			name: "URL",
			env:  map[string]string{"PERSONAQ_REDIS_URL": "redis://user:pw@h:6380/2?dial_timeout=3s&client_name=pq"},
			want: func(t *testing.T, o *redis.UniversalOptions) {
				require.Equal(t, []string{"h:6380"}, o.Addrs)
				require.Equal(t, "user", o.Username)
				require.Equal(t, "pw", o.Password)
				require.Equal(t, 2, o.DB)
				require.Equal(t, 3*time.Second, o.DialTimeout)
				require.Equal(t, "pq", o.ClientName)
				require.False(t, o.IsClusterMode)
				require.Nil(t, o.TLSConfig)
			},
			client: &redis.Client{},
		},
		{
			name: "FieldsWinOverURL",
			env:  map[string]string{"PERSONAQ_REDIS_URL": "redis://user:pw@h:6380/2", "PERSONAQ_REDIS_PASSWORD": "envpw", "PERSONAQ_REDIS_USERNAME": "envuser", "PERSONAQ_REDIS_DB": "5"},
			want: func(t *testing.T, o *redis.UniversalOptions) {
				require.Equal(t, "envuser", o.Username)
				require.Equal(t, "envpw", o.Password)
				require.Equal(t, 5, o.DB)
			},
		},
		{
			name: "RedissURL",
			env:  map[string]string{"PERSONAQ_REDIS_URL": "rediss://h:6380"},
			want: func(t *testing.T, o *redis.UniversalOptions) {
				require.NotNil(t, o.TLSConfig)
				require.Equal(t, "h", o.TLSConfig.ServerName)
			},
		},
		{
			name: "RedissWithCA",
			env:  map[string]string{"PERSONAQ_REDIS_URL": "rediss://h:6380", "PERSONAQ_REDIS_TLS_CA_FILE": cert},
			want: func(t *testing.T, o *redis.UniversalOptions) {
				require.Equal(t, "h", o.TLSConfig.ServerName)
				require.NotNil(t, o.TLSConfig.RootCAs)
			},
		},
		{
			name: "Cluster",
			env:  map[string]string{"PERSONAQ_REDIS_ADDRS": "a:7000,b:7001", "PERSONAQ_REDIS_PASSWORD": "pw", "PERSONAQ_REDIS_TLS_ENABLED": "true"},
			want: func(t *testing.T, o *redis.UniversalOptions) {
				require.Equal(t, []string{"a:7000", "b:7001"}, o.Addrs)
				require.True(t, o.IsClusterMode)
				require.Equal(t, "pw", o.Password)
				require.NotNil(t, o.TLSConfig)
			},
			client: &redis.ClusterClient{},
		},
		{
			name: "Sentinel",
			env:  map[string]string{"PERSONAQ_REDIS_SENTINEL_MASTER_NAME": "mymaster", "PERSONAQ_REDIS_SENTINEL_ADDRS": "s1:26379,s2:26379"},
			want: func(t *testing.T, o *redis.UniversalOptions) {
				require.Equal(t, "mymaster", o.MasterName)
				require.Equal(t, []string{"s1:26379", "s2:26379"}, o.Addrs)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := mustParse(t, echoOnly, tt.env)
			o, err := f.RedisOptions()
			require.NoError(t, err)
			tt.want(t, o)
			if tt.client != nil { // building a client dials nothing
				c := redis.NewUniversalClient(o)
				require.IsType(t, tt.client, c)
				require.NoError(t, c.Close())
			}
		})
	}
	t.Run("NoneConfigured", func(t *testing.T) {
		t.Parallel()
		o, err := mustParse(t, echoOnly, nil).RedisOptions()
		require.NoError(t, err)
		require.Nil(t, o)
	})
	t.Run("MissingCA", func(t *testing.T) {
		t.Parallel()
		f := mustParse(t, echoOnly, map[string]string{"PERSONAQ_REDIS_URL": "redis://h:1", "PERSONAQ_REDIS_TLS_CA_FILE": "/nonexistent/ca.pem"})
		_, err := f.RedisOptions()
		require.ErrorIs(t, err, config.ErrInvalid)
		require.ErrorContains(t, err, "invalid config: redis.tls.ca_file: ")
	})
}

func TestTopology(t *testing.T) {
	t.Parallel()
	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, wire.Topology{}.WithDefaults(), mustParse(t, echoOnly, nil).Topology())
	})
	t.Run("Set", func(t *testing.T) {
		t.Parallel()
		f := mustParse(t, "topology: {requests_stream: R, requests_prefix: r, quarantine_stream: Q, quarantine_prefix: q, outcomes_stream: O, outcomes_prefix: o, replicas: 3, storage: memory, duplicate_window: 5m, outcomes_max_age: 1h, "+
			"output_stream: L, output_prefix: l, output_max_age: 10m, output_max_bytes: 1048576, output_attempt_max: 4096}\n"+dedent(echoOnly), nil)
		want := wire.Topology{
			RequestsStream: "R", RequestsPrefix: "r", QuarantineStream: "Q", QuarantinePrefix: "q",
			OutcomesStream: "O", OutcomesPrefix: "o", Replicas: 3, Storage: jetstream.MemoryStorage,
			DuplicateWindow: 5 * time.Minute, OutcomesMaxAge: time.Hour,
			Output: wire.OutputTopology{Stream: "L", Prefix: "l", MaxAge: 10 * time.Minute, MaxBytes: 1 << 20, AttemptMax: 4096},
		}.WithDefaults()
		got := f.Topology()
		require.Equal(t, want, got)
		require.NoError(t, got.Validate())
	})
}
