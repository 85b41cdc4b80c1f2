package config_test

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/config"
)

const echoOnly = `
	personas:
		echo:
			invoker: {type: demo, demo: echo}
`

func d(s string) config.Duration {
	v, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return config.Duration(v)
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	got := mustParse(t, echoOnly, nil)
	want := &config.File{
		NATS:  config.NATSConfig{URLs: []string{"nats://127.0.0.1:4222"}, Name: "personaq"},
		Redis: config.RedisConfig{TTL: d("168h")},
		TopologyConfig: config.TopologyConfig{
			RequestsStream: "PERSONAQ_REQUESTS", RequestsPrefix: "personaq.requests",
			QuarantineStream: "PERSONAQ_QUARANTINE", QuarantinePrefix: "personaq.quarantine",
			OutcomesStream: "PERSONAQ_OUTCOMES", OutcomesPrefix: "personaq.outcomes",
			Replicas: 1, Storage: "file", DuplicateWindow: d("2m"), OutcomesMaxAge: d("168h"),
			OutputsBucket: "PERSONAQ_OUTPUTS", InlineOutputMax: 65536,
			AttemptsStream: "PERSONAQ_ATTEMPTS", AttemptsPrefix: "personaq.attempts", AttemptsMaxAge: d("24h"),
			AttemptsMaxBytes: 256 << 20,
			OutputStream:     "PERSONAQ_OUTPUT", OutputPrefix: "personaq.output", OutputMaxAge: d("1h"),
			OutputMaxBytes: 256 << 20, OutputAttemptMax: 1 << 20,
		},
		Runtime: config.RuntimeConfig{DrainTimeout: d("30s"), FetchMaxWait: d("1s"), UnknownPersonaGrace: d("5m"), AttemptEvents: ptr(true)},
		Defaults: config.DefaultsConfig{Policy: "persona", Concurrency: 16, MaxReplicas: 4, Timeout: d("10m"), CodingTimeout: d("3m"),
			MaxRetries: ptr(3), Circuit: config.CircuitConfig{Failures: 5, CoolDown: d("30s")}},
		API: config.APIConfig{Listen: "127.0.0.1:8081"},
		PersonaConfigs: map[string]*config.PersonaConfig{"echo": {
			Invoker: config.InvokerConfig{Type: "demo", Demo: "echo"},
			Timeout: d("10m"), Policy: config.PolicyConfig{Preset: "persona"}, Concurrency: 16, MaxReplicas: 4,
			Circuit: config.CircuitConfig{Failures: 5, CoolDown: d("30s")},
		}},
	}
	require.Empty(t, cmp.Diff(want, got, cmpopts.IgnoreUnexported(config.PersonaConfig{}, config.PolicyConfig{})))
	require.Equal(t, "defaults.timeout", got.PersonaConfigs["echo"].TimeoutSource())
	require.False(t, got.Redis.Enabled())
	require.Equal(t, "nats://127.0.0.1:4222", got.NATS.URL())
}

func TestLoadFile(t *testing.T) {
	t.Parallel()
	t.Run("ReadsTheFile", func(t *testing.T) {
		t.Parallel()
		path := writeFile(t, "personaq.yaml", dedent(echoOnly))
		f, err := config.Load(path, os.LookupEnv)
		require.NoError(t, err)
		require.Contains(t, f.PersonaConfigs, "echo")
	})
	t.Run("MissingFileIsNotInvalid", func(t *testing.T) {
		t.Parallel()
		_, err := config.Load(t.TempDir()+"/nope.yaml", nil)
		require.ErrorIs(t, err, fs.ErrNotExist)
		require.NotErrorIs(t, err, config.ErrInvalid)
	})
	t.Run("EmptyFileNeedsPersonas", func(t *testing.T) {
		t.Parallel()
		_, err := parse(t, "", nil)
		require.Equal(t, []string{"invalid config: personas: at least one persona is required"}, problems(t, err))
	})
	t.Run("SyntaxErrorHasLine", func(t *testing.T) {
		t.Parallel()
		_, err := parse(t, "nats:\n  urls: [a\nredis: {", nil)
		require.ErrorIs(t, err, config.ErrInvalid)
		var fe *config.FieldError
		require.ErrorAs(t, err, &fe)
		require.Positive(t, fe.Line)
	})
}

// TestEnvOverrides sets each global variable in turn and checks the field
// it overrides; it also checks the table covers every variable.
func TestEnvOverrides(t *testing.T) {
	t.Parallel()
	type row struct {
		env, value string
		extra      map[string]string // other variables the value needs to be valid
		get        func(*config.File) any
		want       any
	}
	redisURL := map[string]string{"PERSONAQ_REDIS_URL": "redis://127.0.0.1:6379"}
	rows := []row{
		{"PERSONAQ_NATS_URLS", " nats://a:4222, nats://b:4222 ,", nil, func(f *config.File) any { return f.NATS.URLs }, []string{"nats://a:4222", "nats://b:4222"}},
		{"PERSONAQ_NATS_CREDS_FILE", "/x.creds", nil, func(f *config.File) any { return f.NATS.CredsFile }, "/x.creds"},
		{"PERSONAQ_NATS_NKEY_FILE", "/x.nk", nil, func(f *config.File) any { return f.NATS.NkeyFile }, "/x.nk"},
		{"PERSONAQ_NATS_USER", "u", nil, func(f *config.File) any { return f.NATS.User }, "u"},
		{"PERSONAQ_NATS_PASSWORD", "pw", map[string]string{"PERSONAQ_NATS_USER": "u"}, func(f *config.File) any { return f.NATS.Password }, "pw"},
		{"PERSONAQ_NATS_TOKEN", "tok", nil, func(f *config.File) any { return f.NATS.Token }, "tok"},
		{"PERSONAQ_NATS_NAME", "worker-1", nil, func(f *config.File) any { return f.NATS.Name }, "worker-1"},
		{"PERSONAQ_NATS_TLS_ENABLED", "true", nil, func(f *config.File) any { return f.NATS.TLS.Enabled }, true},
		{"PERSONAQ_NATS_TLS_CA_FILE", "/ca.pem", nil, func(f *config.File) any { return f.NATS.TLS.CAFile }, "/ca.pem"},
		{"PERSONAQ_NATS_TLS_CERT_FILE", "/c.pem", map[string]string{"PERSONAQ_NATS_TLS_KEY_FILE": "/k.pem"}, func(f *config.File) any { return f.NATS.TLS.CertFile }, "/c.pem"},
		{"PERSONAQ_NATS_TLS_KEY_FILE", "/k.pem", map[string]string{"PERSONAQ_NATS_TLS_CERT_FILE": "/c.pem"}, func(f *config.File) any { return f.NATS.TLS.KeyFile }, "/k.pem"},
		{"PERSONAQ_NATS_TLS_INSECURE_SKIP_VERIFY", "1", nil, func(f *config.File) any { return f.NATS.TLS.InsecureSkipVerify }, true},
		{"PERSONAQ_REDIS_URL", "redis://r:6379/2", nil, func(f *config.File) any { return f.Redis.URL }, "redis://r:6379/2"},
		{"PERSONAQ_REDIS_ADDRS", "a:1,b:2", nil, func(f *config.File) any { return f.Redis.Addrs }, []string{"a:1", "b:2"}},
		{"PERSONAQ_REDIS_SENTINEL_MASTER_NAME", "mymaster", map[string]string{"PERSONAQ_REDIS_SENTINEL_ADDRS": "s:26379"}, func(f *config.File) any { return f.Redis.Sentinel.MasterName }, "mymaster"},
		{"PERSONAQ_REDIS_SENTINEL_ADDRS", "s1:26379,s2:26379", map[string]string{"PERSONAQ_REDIS_SENTINEL_MASTER_NAME": "m"}, func(f *config.File) any { return f.Redis.Sentinel.Addrs }, []string{"s1:26379", "s2:26379"}},
		{"PERSONAQ_REDIS_USERNAME", "ru", redisURL, func(f *config.File) any { return f.Redis.Username }, "ru"},
		{"PERSONAQ_REDIS_PASSWORD", "rp", redisURL, func(f *config.File) any { return f.Redis.Password }, "rp"},
		{"PERSONAQ_REDIS_DB", "3", redisURL, func(f *config.File) any { return f.Redis.DB }, 3},
		{"PERSONAQ_REDIS_TLS_ENABLED", "true", redisURL, func(f *config.File) any { return f.Redis.TLS.Enabled }, true},
		{"PERSONAQ_REDIS_TLS_CA_FILE", "/ca.pem", redisURL, func(f *config.File) any { return f.Redis.TLS.CAFile }, "/ca.pem"},
		{"PERSONAQ_REDIS_TLS_CERT_FILE", "/c.pem", map[string]string{"PERSONAQ_REDIS_URL": "redis://r:1", "PERSONAQ_REDIS_TLS_KEY_FILE": "/k.pem"}, func(f *config.File) any { return f.Redis.TLS.CertFile }, "/c.pem"},
		{"PERSONAQ_REDIS_TLS_KEY_FILE", "/k.pem", map[string]string{"PERSONAQ_REDIS_URL": "redis://r:1", "PERSONAQ_REDIS_TLS_CERT_FILE": "/c.pem"}, func(f *config.File) any { return f.Redis.TLS.KeyFile }, "/k.pem"},
		{"PERSONAQ_REDIS_TLS_INSECURE_SKIP_VERIFY", "true", redisURL, func(f *config.File) any { return f.Redis.TLS.InsecureSkipVerify }, true},
		{"PERSONAQ_REDIS_TTL", "24h", nil, func(f *config.File) any { return f.Redis.TTL }, d("24h")},
		{"PERSONAQ_REDIS_PREFIX", "pq", nil, func(f *config.File) any { return f.Redis.Prefix }, "pq"},
		{"PERSONAQ_TOPOLOGY_REQUESTS_STREAM", "REQ", nil, func(f *config.File) any { return f.TopologyConfig.RequestsStream }, "REQ"},
		{"PERSONAQ_TOPOLOGY_REQUESTS_PREFIX", "a.req", nil, func(f *config.File) any { return f.TopologyConfig.RequestsPrefix }, "a.req"},
		{"PERSONAQ_TOPOLOGY_QUARANTINE_STREAM", "QUA", nil, func(f *config.File) any { return f.TopologyConfig.QuarantineStream }, "QUA"},
		{"PERSONAQ_TOPOLOGY_QUARANTINE_PREFIX", "a.qua", nil, func(f *config.File) any { return f.TopologyConfig.QuarantinePrefix }, "a.qua"},
		{"PERSONAQ_TOPOLOGY_OUTCOMES_STREAM", "OUT", nil, func(f *config.File) any { return f.TopologyConfig.OutcomesStream }, "OUT"},
		{"PERSONAQ_TOPOLOGY_OUTCOMES_PREFIX", "a.out", nil, func(f *config.File) any { return f.TopologyConfig.OutcomesPrefix }, "a.out"},
		{"PERSONAQ_TOPOLOGY_REPLICAS", "3", nil, func(f *config.File) any { return f.TopologyConfig.Replicas }, 3},
		{"PERSONAQ_TOPOLOGY_STORAGE", "memory", nil, func(f *config.File) any { return f.TopologyConfig.Storage }, "memory"},
		{"PERSONAQ_TOPOLOGY_DUPLICATE_WINDOW", "5m", nil, func(f *config.File) any { return f.TopologyConfig.DuplicateWindow }, d("5m")},
		{"PERSONAQ_TOPOLOGY_OUTCOMES_MAX_AGE", "24h", nil, func(f *config.File) any { return f.TopologyConfig.OutcomesMaxAge }, d("24h")},
		{"PERSONAQ_TOPOLOGY_OUTPUTS_BUCKET", "OUT", nil, func(f *config.File) any { return f.TopologyConfig.OutputsBucket }, "OUT"},
		{"PERSONAQ_TOPOLOGY_INLINE_OUTPUT_MAX", "1024", nil, func(f *config.File) any { return f.TopologyConfig.InlineOutputMax }, 1024},
		{"PERSONAQ_TOPOLOGY_ATTEMPTS_STREAM", "ATT", nil, func(f *config.File) any { return f.TopologyConfig.AttemptsStream }, "ATT"},
		{"PERSONAQ_TOPOLOGY_ATTEMPTS_PREFIX", "att", nil, func(f *config.File) any { return f.TopologyConfig.AttemptsPrefix }, "att"},
		{"PERSONAQ_TOPOLOGY_ATTEMPTS_MAX_AGE", "1h", nil, func(f *config.File) any { return f.TopologyConfig.AttemptsMaxAge }, d("1h")},
		{"PERSONAQ_TOPOLOGY_ATTEMPTS_MAX_BYTES", "1048576", nil, func(f *config.File) any { return f.TopologyConfig.AttemptsMaxBytes }, 1048576},
		{"PERSONAQ_TOPOLOGY_OUTPUT_STREAM", "LIVE", nil, func(f *config.File) any { return f.TopologyConfig.OutputStream }, "LIVE"},
		{"PERSONAQ_TOPOLOGY_OUTPUT_PREFIX", "live.out", nil, func(f *config.File) any { return f.TopologyConfig.OutputPrefix }, "live.out"},
		{"PERSONAQ_TOPOLOGY_OUTPUT_MAX_AGE", "10m", nil, func(f *config.File) any { return f.TopologyConfig.OutputMaxAge }, d("10m")},
		{"PERSONAQ_TOPOLOGY_OUTPUT_MAX_BYTES", "1048576", nil, func(f *config.File) any { return f.TopologyConfig.OutputMaxBytes }, 1048576},
		{"PERSONAQ_TOPOLOGY_OUTPUT_ATTEMPT_MAX", "4096", nil, func(f *config.File) any { return f.TopologyConfig.OutputAttemptMax }, 4096},
		{"PERSONAQ_RUNTIME_DRAIN_TIMEOUT", "45s", nil, func(f *config.File) any { return f.Runtime.DrainTimeout }, d("45s")},
		{"PERSONAQ_RUNTIME_FETCH_MAX_WAIT", "250ms", nil, func(f *config.File) any { return f.Runtime.FetchMaxWait }, d("250ms")},
		{"PERSONAQ_RUNTIME_UNKNOWN_PERSONA_GRACE", "1m", nil, func(f *config.File) any { return f.Runtime.UnknownPersonaGrace }, d("1m")},
		{"PERSONAQ_RUNTIME_ATTEMPT_EVENTS", "false", nil, func(f *config.File) any { return *f.Runtime.AttemptEvents }, false},
		{"PERSONAQ_API_LISTEN", "0.0.0.0:9000", nil, func(f *config.File) any { return f.API.Listen }, "0.0.0.0:9000"},
		{"PERSONAQ_API_TLS_CERT", "c.pem", map[string]string{"PERSONAQ_API_TLS_KEY": "k.pem"}, func(f *config.File) any { return f.API.TLSCert }, "c.pem"},
		{"PERSONAQ_API_TLS_KEY", "k.pem", map[string]string{"PERSONAQ_API_TLS_CERT": "c.pem"}, func(f *config.File) any { return f.API.TLSKey }, "k.pem"},
		{"PERSONAQ_API_INDEX_SIZE", "7", nil, func(f *config.File) any { return f.API.IndexSize }, 7},
		{"PERSONAQ_DEFAULTS_POLICY", "llm", nil, func(f *config.File) any { return f.PersonaConfigs["echo"].Policy.Preset }, "llm"},
		{"PERSONAQ_DEFAULTS_CONCURRENCY", "7", nil, func(f *config.File) any { return f.PersonaConfigs["echo"].Concurrency }, 7},
		{"PERSONAQ_DEFAULTS_MAX_REPLICAS", "9", nil, func(f *config.File) any { return f.PersonaConfigs["echo"].MaxReplicas }, 9},
		{"PERSONAQ_DEFAULTS_TIMEOUT", "7m", nil, func(f *config.File) any { return f.PersonaConfigs["echo"].Timeout }, d("7m")},
		{"PERSONAQ_DEFAULTS_CODING_TIMEOUT", "4m", nil, func(f *config.File) any { return f.Defaults.CodingTimeout }, d("4m")},
		{"PERSONAQ_DEFAULTS_MAX_RETRIES", "5", nil, func(f *config.File) any { return *f.Defaults.MaxRetries }, 5},
		{"PERSONAQ_DEFAULTS_CIRCUIT_FAILURES", "7", nil, func(f *config.File) any { return f.PersonaConfigs["echo"].Circuit.Failures }, 7},
		{"PERSONAQ_DEFAULTS_CIRCUIT_COOL_DOWN", "2m", nil, func(f *config.File) any { return f.PersonaConfigs["echo"].Circuit.CoolDown }, d("2m")},
	}

	var tested []string
	for _, r := range rows {
		tested = append(tested, r.env)
	}
	var global []string
	for _, name := range config.EnvNames() {
		if !strings.HasPrefix(name, "PERSONAQ_PERSONAS_") && name != "PERSONA_TIMEOUTS_JSON" {
			global = append(global, name)
		}
	}
	require.Equal(t, global, tested, "one row per global variable, in table order")

	for _, r := range rows {
		t.Run(r.env, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{r.env: r.value}
			for k, v := range r.extra {
				env[k] = v
			}
			f := mustParse(t, echoOnly, env)
			require.Equal(t, r.want, r.get(f))
		})
	}

	t.Run("EmptyValueIsUnset", func(t *testing.T) {
		t.Parallel()
		f := mustParse(t, "nats: {name: fromfile}\n"+dedent(echoOnly), map[string]string{"PERSONAQ_NATS_NAME": ""})
		require.Equal(t, "fromfile", f.NATS.Name)
	})
	t.Run("EnvWinsOverFile", func(t *testing.T) {
		t.Parallel()
		f := mustParse(t, "redis: {url: 'redis://file:6379', password: filepw}\n"+dedent(echoOnly),
			map[string]string{"PERSONAQ_REDIS_PASSWORD": "envpw"})
		require.Equal(t, "envpw", f.Redis.Password)
	})
}

func TestPersonaEnvOverrides(t *testing.T) {
	t.Parallel()
	const src = `
		limiters:
			gpt: {requests_per_minute: 60}
		personas:
			tester-qa:
				invoker: {type: command, path: /bin/true}
				concurrency: 2
			web:
				invoker: {type: http, url: "http://127.0.0.1:1/x"}
	`
	rows := []struct {
		env, value string
		get        func(*config.File) any
		want       any
	}{
		{"PERSONAQ_PERSONAS_TESTER_QA_TIMEOUT", "42s", func(f *config.File) any { return f.PersonaConfigs["tester-qa"].Timeout }, d("42s")},
		{"PERSONAQ_PERSONAS_TESTER_QA_POLICY", "local", func(f *config.File) any { return f.PersonaConfigs["tester-qa"].Policy.Preset }, "local"},
		{"PERSONAQ_PERSONAS_TESTER_QA_CONCURRENCY", "5", func(f *config.File) any { return f.PersonaConfigs["tester-qa"].Concurrency }, 5},
		{"PERSONAQ_PERSONAS_TESTER_QA_MAX_REPLICAS", "2", func(f *config.File) any { return f.PersonaConfigs["tester-qa"].MaxReplicas }, 2},
		{"PERSONAQ_PERSONAS_TESTER_QA_ACK_WAIT", "3m", func(f *config.File) any { return f.PersonaConfigs["tester-qa"].AckWait }, d("3m")},
		{"PERSONAQ_PERSONAS_TESTER_QA_MAX_DELIVER", "20", func(f *config.File) any { return f.PersonaConfigs["tester-qa"].MaxDeliver }, 20},
		{"PERSONAQ_PERSONAS_TESTER_QA_CODING", "true", func(f *config.File) any { return f.PersonaConfigs["tester-qa"].Coding }, true},
		{"PERSONAQ_PERSONAS_TESTER_QA_RATE_LIMIT_LIMITER", "gpt", func(f *config.File) any { return f.PersonaConfigs["tester-qa"].RateLimit.Limiter }, "gpt"},
		{"PERSONAQ_PERSONAS_TESTER_QA_CIRCUIT_FAILURES", "2", func(f *config.File) any { return f.PersonaConfigs["tester-qa"].Circuit.Failures }, 2},
		{"PERSONAQ_PERSONAS_TESTER_QA_CIRCUIT_COOL_DOWN", "10s", func(f *config.File) any { return f.PersonaConfigs["tester-qa"].Circuit.CoolDown }, d("10s")},
		{"PERSONAQ_PERSONAS_TESTER_QA_CIRCUIT_DISABLED", "true", func(f *config.File) any { return f.PersonaConfigs["tester-qa"].Circuit.Disabled }, true},
		{"PERSONAQ_PERSONAS_WEB_INVOKER_URL", "https://agents.example/web", func(f *config.File) any { return f.PersonaConfigs["web"].Invoker.URL }, "https://agents.example/web"},
		{"PERSONAQ_PERSONAS_TESTER_QA_INVOKER_PATH", "/usr/local/bin/agent", func(f *config.File) any { return f.PersonaConfigs["tester-qa"].Invoker.Path }, "/usr/local/bin/agent"},
		{"PERSONAQ_PERSONAS_TESTER_QA_INVOKER_MAX_RESPONSE_BYTES", "8388608", func(f *config.File) any { return f.PersonaConfigs["tester-qa"].Invoker.MaxResponseBytes }, int64(8388608)},
	}
	keys := map[string]bool{}
	for _, r := range rows {
		_, key, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(r.env, "PERSONAQ_PERSONAS_"), "TESTER_QA_"), "WEB_")
		if key == "" {
			key = strings.TrimPrefix(r.env, "PERSONAQ_PERSONAS_TESTER_QA_")
		}
		keys["PERSONAQ_PERSONAS_<NAME>_"+key] = true
	}
	for _, name := range config.EnvNames() {
		if strings.HasPrefix(name, "PERSONAQ_PERSONAS_") {
			require.True(t, keys[name], "no row for %s", name)
		}
	}
	for _, r := range rows {
		t.Run(r.env, func(t *testing.T) {
			t.Parallel()
			f := mustParse(t, src, map[string]string{r.env: r.value})
			require.Equal(t, r.want, r.get(f))
		})
	}
}

func TestPersonaEnvName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "PERSONAQ_PERSONAS_TESTER_QA_TIMEOUT", config.PersonaEnvName("tester-qa", "timeout"))
	require.Equal(t, "PERSONAQ_PERSONAS_LEAD_ENGINEER_INVOKER_URL", config.PersonaEnvName("lead-engineer", "invoker.url"))
	require.Equal(t, "PERSONAQ_REDIS_SENTINEL_MASTER_NAME", config.EnvName("redis.sentinel.master_name"))
}

// TestTimeoutPrecedence walks the chain, environment over file like every
// other setting: PERSONAQ_PERSONAS_X_TIMEOUT > PERSONA_TIMEOUTS_JSON >
// persona YAML timeout > built-in > coding default > global default.
func TestTimeoutPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		persona    string
		body       string // persona settings after the invoker
		defaults   string
		env        map[string]string
		want       config.Duration
		wantSource string
	}{
		{
			name: "PersonaEnvWinsOverEverything", persona: "planner", body: "timeout: 11s\ncoding: true",
			env:  map[string]string{"PERSONAQ_PERSONAS_PLANNER_TIMEOUT": "22s", "PERSONA_TIMEOUTS_JSON": `{"planner":33000}`},
			want: d("22s"), wantSource: "PERSONAQ_PERSONAS_PLANNER_TIMEOUT",
		},
		{
			name: "JSONWinsOverYAML", persona: "planner", body: "timeout: 11s",
			env:  map[string]string{"PERSONA_TIMEOUTS_JSON": `{"planner":33000}`},
			want: d("33s"), wantSource: "PERSONA_TIMEOUTS_JSON",
		},
		{
			name: "YAMLWinsWithoutEnv", persona: "planner", body: "timeout: 11s\ncoding: true",
			env:  map[string]string{"PERSONA_TIMEOUTS_JSON": `{"context":33000}`},
			want: d("11s"), wantSource: "yaml",
		},
		{
			name: "AttemptTimeoutIsTheYAMLTimeout", persona: "planner", body: "policy: {attempt_timeout: 12s}",
			want: d("12s"), wantSource: "yaml",
		},
		{
			name: "PersonaEnvWinsOverJSON", persona: "planner",
			env:  map[string]string{"PERSONAQ_PERSONAS_PLANNER_TIMEOUT": "22s", "PERSONA_TIMEOUTS_JSON": `{"planner":33000}`},
			want: d("22s"), wantSource: "PERSONAQ_PERSONAS_PLANNER_TIMEOUT",
		},
		{
			name: "JSONWinsOverBuiltin", persona: "planner",
			env:  map[string]string{"PERSONA_TIMEOUTS_JSON": `{"planner":33000,"context":1000}`},
			want: d("33s"), wantSource: "PERSONA_TIMEOUTS_JSON",
		},
		{
			name: "JSONWinsOverCoding", persona: "coder", body: "coding: true",
			env:  map[string]string{"PERSONA_TIMEOUTS_JSON": `{"coder":5000}`},
			want: d("5s"), wantSource: "PERSONA_TIMEOUTS_JSON",
		},
		{
			name: "BuiltinWinsOverCoding", persona: "lead-engineer", body: "coding: true",
			want: d("90s"), wantSource: "built-in",
		},
		{
			name: "CodingWinsOverDefault", persona: "coder", body: "coding: true", defaults: "timeout: 7m",
			want: d("3m"), wantSource: "defaults.coding_timeout",
		},
		{
			name: "CodingTimeoutFromEnv", persona: "coder", body: "coding: true",
			env:  map[string]string{"PERSONAQ_DEFAULTS_CODING_TIMEOUT": "4m"},
			want: d("4m"), wantSource: "defaults.coding_timeout",
		},
		{
			name: "GlobalDefault", persona: "other",
			want: d("10m"), wantSource: "defaults.timeout",
		},
		{
			name: "GlobalDefaultFromFile", persona: "other", defaults: "timeout: 7m",
			env:  map[string]string{"PERSONA_TIMEOUTS_JSON": `{"planner":33000}`},
			want: d("7m"), wantSource: "defaults.timeout",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := "defaults: {" + strings.ReplaceAll(tt.defaults, "\n", ", ") + "}\n" +
				"personas:\n  " + tt.persona + ":\n    invoker: {type: demo, demo: echo}\n"
			for l := range strings.SplitSeq(tt.body, "\n") {
				if l != "" {
					src += "    " + l + "\n"
				}
			}
			f, err := config.Parse([]byte(src), envOf(tt.env))
			require.NoError(t, err)
			p := f.PersonaConfigs[tt.persona]
			require.Equal(t, tt.want, p.Timeout)
			require.Equal(t, tt.wantSource, p.TimeoutSource())

			personas, err := f.Personas(nil)
			require.NoError(t, err)
			require.Equal(t, tt.want.Std(), personas[0].Policy.AttemptTimeout)
		})
	}
}

// TestValidation checks that each problem is reported naming its field.
func TestValidation(t *testing.T) {
	t.Parallel()
	persona := func(lines ...string) string {
		return "personas:\n  p:\n" + indent(lines, "    ")
	}
	demo := "invoker: {type: demo, demo: echo}"
	tests := []struct {
		name string
		src  string
		env  map[string]string
		want []string // each one of the problems, in order
	}{
		{
			name: "HTTPURLRequired", src: "personas:\n  planner:\n    invoker: {type: http}\n",
			want: []string{"invalid config: personas.planner.invoker.url: required for type http"},
		},
		{
			name: "HTTPURLNotAbsolute", src: persona("invoker: {type: http, url: 'ftp://u:hunter2@h/x'}"),
			want: []string{"invalid config: personas.p.invoker.url: want an absolute http(s) URL, got ftp://u:***@h/x"},
		},
		{
			name: "Replicas", src: "topology: {replicas: 2}\n" + persona(demo),
			want: []string{"invalid config: topology.replicas: must be 1, 3 or 5, got 2"},
		},
		{
			name: "UnknownPreset", src: persona(demo, "policy: nope"),
			want: []string{`invalid config: personas.p.policy.preset: unknown preset "nope" (known: llm, local, git, write, persona, adaptive)`},
		},
		{
			name: "UnknownDefaultPreset", src: "defaults: {policy: nope}\n" + persona(demo),
			want: []string{
				`invalid config: defaults.policy: unknown preset "nope" (known: llm, local, git, write, persona, adaptive)`,
				`invalid config: personas.p.policy.preset: unknown preset "nope" (known: llm, local, git, write, persona, adaptive)`,
			},
		},
		{
			name: "BadDuration", src: persona(demo, "timeout: 90x"),
			want: []string{`invalid config: personas.p.timeout: line 4: invalid duration "90x": want a number with a unit, such as "90s" or "10m"`},
		},
		{
			name: "DurationWithoutUnit", src: "runtime:\n  drain_timeout: 30\n" + persona(demo),
			want: []string{`invalid config: runtime.drain_timeout: line 2: invalid duration "30": want a number with a unit, such as "90s" or "10m"`},
		},
		{
			name: "DurationNotScalar", src: "redis:\n  ttl: [1h]\n" + persona(demo),
			want: []string{`invalid config: redis.ttl: line 2: want a duration such as "90s" or "10m"`},
		},
		{
			name: "WrongType", src: persona(demo, "concurrency: many"),
			want: []string{"invalid config: personas.p.concurrency: line 4: cannot unmarshal !!str `many` into int"},
		},
		{
			name: "NegativeNumbers",
			src:  "redis: {url: 'redis://h:1', db: -1, ttl: -1h}\ndefaults: {concurrency: -2, timeout: -1s}\n" + persona(demo, "timeout: -5s", "concurrency: -1", "max_replicas: -1", "ack_wait: -1s", "max_deliver: -3"),
			want: []string{
				"invalid config: redis.db: must not be negative, got -1",
				"invalid config: redis.ttl: must not be negative, got -1h",
				"invalid config: defaults.concurrency: must not be negative, got -2",
				"invalid config: defaults.timeout: must not be negative, got -1s",
				"invalid config: personas.p.timeout: must be positive, got -5s",
				"invalid config: personas.p.concurrency: must not be negative, got -1",
				"invalid config: personas.p.max_replicas: must not be negative, got -1",
				"invalid config: personas.p.ack_wait: must not be negative, got -1s",
				"invalid config: personas.p.max_deliver: must not be negative, got -3",
			},
		},
		{
			name: "MissingInvokerType", src: persona("invoker: {url: 'http://h/x'}"),
			want: []string{"invalid config: personas.p.invoker.type: required (http, command or demo)"},
		},
		{
			name: "NoInvokerAtAll", src: "personas:\n  p:\n",
			want: []string{"invalid config: personas.p.invoker.type: required (http, command or demo)"},
		},
		{
			name: "UnknownInvokerType", src: persona("invoker: {type: grpc}"),
			want: []string{`invalid config: personas.p.invoker.type: unknown invoker type "grpc" (want http, command or demo)`},
		},
		{
			name: "FieldOfAnotherInvokerType", src: persona("invoker: {type: http, url: 'http://h/x', path: /bin/x, demo: echo}"),
			want: []string{
				"invalid config: personas.p.invoker.demo: not used by invoker type http",
				"invalid config: personas.p.invoker.path: not used by invoker type http",
			},
		},
		{
			name: "CommandPathRequired", src: persona("invoker: {type: command}"),
			want: []string{"invalid config: personas.p.invoker.path: required for type command"},
		},
		{
			name: "ExitCodes", src: persona(`invoker: {type: command, path: x, exit_codes: {"300": retryable, "7": snooze, "x": terminal}}`),
			want: []string{
				`invalid config: personas.p.invoker.exit_codes.300: exit codes run from 0 to 255, got "300"`,
				`invalid config: personas.p.invoker.exit_codes.7: want succeeded, retryable, timeout, network, validation or terminal, got "snooze"`,
				`invalid config: personas.p.invoker.exit_codes.x: exit codes run from 0 to 255, got "x"`,
			},
		},
		{
			name: "DemoUnknown", src: persona("invoker: {type: demo, demo: nope}"),
			want: []string{`invalid config: personas.p.invoker.demo: unknown demo persona "nope" (known: echo, flaky, plateau, slowpoke, terminal, validator)`},
		},
		{
			name: "HTTPPortOutOfRange", src: persona("invoker: {type: http, url: 'http://127.0.0.1:99999/x'}"),
			want: []string{"invalid config: personas.p.invoker.url: port must be 1 to 65535, got 99999"},
		},
		{
			name: "NATSPortOutOfRange", src: "nats: {urls: ['nats://127.0.0.1:70000']}\n" + persona(demo),
			want: []string{"invalid config: nats.urls[0]: port must be 1 to 65535, got 70000"},
		},
		{
			name: "ExplicitZeroMaxAttempts", src: persona(demo, "policy: {preset: llm, max_attempts: 0}"),
			want: []string{"invalid config: personas.p.policy.max_attempts: must be in [1,1000], got 0 (leave it out for the preset's value)"},
		},
		{
			name: "DefaultMaxRetriesRange", src: "defaults: {max_retries: -1}\n" + persona(demo),
			want: []string{"invalid config: defaults.max_retries: must be in [0,999], got -1"},
		},
		{
			name: "ProgressIntervalNegative", src: persona(demo, "policy: {progress_interval: -1s}"),
			want: []string{"invalid config: personas.p.policy.progress_interval: must not be negative, got -1s"},
		},
		{
			name: "PersonaName", src: "personas:\n  'bad name':\n    " + demo + "\n",
			want: []string{`invalid config: personas.bad name: persona names use letters, digits, '-' and '_' (they are NATS subject tokens), got "bad name"`},
		},
		{
			name: "PersonaEnvNameCollision", src: "personas:\n  tester-qa:\n    " + demo + "\n  tester_qa:\n    " + demo + "\n",
			want: []string{"invalid config: personas.tester_qa: shares its environment variables (PERSONAQ_PERSONAS_TESTER_QA_*) with persona tester-qa"},
		},
		{
			name: "NoPersonas", src: "nats: {name: x}\n",
			want: []string{"invalid config: personas: at least one persona is required"},
		},
		{
			name: "InlinePolicy",
			src:  persona(demo, "policy: {max_attempts: 1001, non_retryable: [''], network_delay: -1s}"),
			want: []string{
				"invalid config: personas.p.policy.max_attempts: must be in [1,1000], got 1001",
				"invalid config: personas.p.policy.non_retryable[0]: must not be empty",
				"invalid config: personas.p.policy.network_delay: must not be negative, got -1s",
			},
		},
		{
			name: "ScheduleTypeRequired", src: persona(demo, "policy: {schedule: {step: 1s}}"),
			want: []string{"invalid config: personas.p.policy.schedule.type: required (linear, exponential, fixed or list)"},
		},
		{
			name: "ScheduleFieldOfAnotherType", src: persona(demo, "policy: {schedule: {type: linear, step: 1s, jitter: 0.5}}"),
			want: []string{"invalid config: personas.p.policy.schedule.jitter: not used by schedule type linear"},
		},
		{
			name: "ScheduleRequiredFields", src: "personas:\n  a:\n    " + demo + "\n    policy: {schedule: {type: fixed}}\n  b:\n    " + demo + "\n    policy: {schedule: {type: list}}\n",
			want: []string{
				"invalid config: personas.a.policy.schedule.every: required for schedule type fixed",
				"invalid config: personas.b.policy.schedule.delays: required for schedule type list (at least one delay)",
			},
		},
		{
			name: "ScheduleRulesFromRetry", src: persona(demo, "policy: {schedule: {type: exponential, initial: 1s, jitter: 2}}"),
			want: []string{"invalid config: personas.p.policy.schedule.jitter: must be in [0,1], got 2"},
		},
		{
			name: "MaxDeliverNotAboveAttempts", src: persona(demo, "policy: llm", "max_deliver: 3"),
			want: []string{"invalid config: personas.p.max_deliver: must be more than the policy's max_attempts (3: its last delivery is quarantined without running), got 3"},
		},
		{
			name: "AttemptTimeoutContradictsTimeout", src: persona(demo, "timeout: 10s", "policy: {attempt_timeout: 20s}"),
			want: []string{"invalid config: personas.p.policy.attempt_timeout: 20s contradicts timeout 10s: set one of them"},
		},
		{
			name: "NATS",
			src:  "nats:\n  urls: ['http://h:4222', 'nats://u:s3cret@:4222']\n  creds_file: a\n  nkey_file: b\n  token: t\n  user: u\n  tls: {cert_file: c}\n" + persona(demo),
			want: []string{
				`invalid config: nats.urls[0]: scheme must be nats, tls, ws or wss, got "http"`,
				"invalid config: nats.urls[1]: host required in nats://u:***@:4222",
				"invalid config: nats.nkey_file: set creds_file or nkey_file, not both",
				"invalid config: nats.token: set token or user/password, not both",
				"invalid config: nats.tls.cert_file: cert_file and key_file go together (mutual TLS)",
			},
		},
		{
			name: "NATSPasswordWithoutUser", src: "nats: {password: pw}\n" + persona(demo),
			want: []string{"invalid config: nats.password: requires nats.user"},
		},
		{
			name: "RedisModes", src: "redis: {url: 'redis://h:1', addrs: ['a:1'], db: 2}\n" + persona(demo),
			want: []string{
				"invalid config: redis.addrs: set one of url (one server), addrs (Cluster) and sentinel, not url and addrs",
				"invalid config: redis.db: Redis Cluster has only database 0, got 2",
			},
		},
		{
			name: "RedisURL", src: "redis: {url: 'unix:///tmp/redis.sock'}\n" + persona(demo),
			want: []string{`invalid config: redis.url: scheme must be redis or rediss, got "unix"`},
		},
		{
			name: "RedisURLDatabase", src: "redis: {url: 'redis://:pw@h:1/x'}\n" + persona(demo),
			want: []string{`invalid config: redis.url: redis: invalid database number: "x"`},
		},
		{
			name: "RedisSentinel", src: "redis:\n  sentinel: {master_name: m}\n  addrs: [nope]\n" + persona(demo),
			want: []string{
				"invalid config: redis.sentinel: set one of url (one server), addrs (Cluster) and sentinel, not addrs and sentinel",
				`invalid config: redis.addrs[0]: want host:port, got "nope"`,
				"invalid config: redis.sentinel.addrs: required with sentinel.master_name",
			},
		},
		{
			name: "RedisSecretsWithoutServer", src: "redis: {password: pw, tls: {enabled: true}}\n" + persona(demo),
			want: []string{
				"invalid config: redis.password: set, but no Redis server is (set url, addrs or sentinel)",
				"invalid config: redis.tls: set, but no Redis server is (set url, addrs or sentinel)",
			},
		},
		{
			name: "Topology", src: "topology: {storage: disk, requests_stream: 'A.B', quarantine_stream: OUT, outcomes_stream: OUT, outcomes_prefix: 'a.*'}\n" + persona(demo),
			want: []string{
				`invalid config: topology.requests_stream: stream names use letters, digits, '-' and '_', got "A.B"`,
				`invalid config: topology.outcomes_stream: "OUT" is also topology.quarantine_stream`,
				`invalid config: topology.outcomes_prefix: want a subject without wildcards or empty tokens, got "a.*"`,
				`invalid config: topology.storage: must be file or memory, got "disk"`,
			},
		},
		{
			name: "EnvValues", src: persona(demo, "timeout: 5s"),
			env: map[string]string{
				"PERSONAQ_TOPOLOGY_REPLICAS": "three", "PERSONAQ_NATS_TLS_ENABLED": "yes please",
				"PERSONAQ_RUNTIME_DRAIN_TIMEOUT": "30", "PERSONAQ_PERSONAS_P_TIMEOUT": "soon",
			},
			want: []string{
				`invalid config: nats.tls.enabled: PERSONAQ_NATS_TLS_ENABLED: want true or false, got "yes please"`,
				`invalid config: topology.replicas: PERSONAQ_TOPOLOGY_REPLICAS: want an integer, got "three"`,
				`invalid config: runtime.drain_timeout: PERSONAQ_RUNTIME_DRAIN_TIMEOUT: invalid duration "30": want a number with a unit, such as "90s" or "10m"`,
				`invalid config: personas.p.timeout: PERSONAQ_PERSONAS_P_TIMEOUT: invalid duration "soon": want a number with a unit, such as "90s" or "10m"`,
			},
		},
		{
			name: "PersonaTimeoutsJSON", src: persona(demo), env: map[string]string{"PERSONA_TIMEOUTS_JSON": `{"p":-5}`},
			want: []string{`invalid config: PERSONA_TIMEOUTS_JSON["p"]: must be a positive whole number of milliseconds, got -5`},
		},
		{
			name: "SecondDocument", src: persona(demo) + "---\nnats: {}\n",
			want: []string{"invalid config: line 4: a second YAML document; the file must hold one"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Parse([]byte(tt.src), envOf(tt.env))
			require.Error(t, err)
			require.Empty(t, cmp.Diff(tt.want, problems(t, err)))
		})
	}
}

// TestUnknownKeys: strict decoding names the key, its path and its line,
// also inside the types that decode themselves (policy, schedule).
func TestUnknownKeys(t *testing.T) {
	t.Parallel()
	src := dedent(`
		nats:
			urls: [nats://127.0.0.1:4222]
			nmae: personaq
		personas:
			planner:
				invoker: {type: http, url: "http://127.0.0.1:8081/planner", heders: {A: b}}
				timout: 30s
				policy:
					preset: llm
					max_atempts: 5
					schedule:
						type: linear
						stpe: 1s
	`)
	_, err := config.Parse([]byte(src), nil)
	want := []string{
		`invalid config: nats.nmae: line 3: unknown key "nmae"`,
		`invalid config: personas.planner.invoker.heders: line 6: unknown key "heders"`,
		`invalid config: personas.planner.timout: line 7: unknown key "timout"`,
		`invalid config: personas.planner.policy.max_atempts: line 10: unknown key "max_atempts"`,
		`invalid config: personas.planner.policy.schedule.stpe: line 13: unknown key "stpe"`,
	}
	got := problems(t, err)
	for _, w := range want {
		require.Contains(t, got, w)
	}
	var fe *config.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, 3, fe.Line)
}

func TestAllProblemsAtOnce(t *testing.T) {
	t.Parallel()
	src := dedent(`
		topology: {replicas: 2}
		personas:
			planner:
				invoker: {type: http}
				concurrency: -1
			qa:
				invoker: {type: command}
	`)
	_, err := config.Parse([]byte(src), nil)
	require.ErrorIs(t, err, config.ErrInvalid)
	got := problems(t, err)
	require.Len(t, got, 4)
	for _, field := range []string{"topology.replicas", "personas.planner.invoker.url", "personas.planner.concurrency", "personas.qa.invoker.path"} {
		require.True(t, slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, field+": ") }), "no problem names %s in %q", field, got)
	}
	require.True(t, errors.Is(err, config.ErrInvalid))
}

func indent(lines []string, prefix string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(prefix + l + "\n")
	}
	return b.String()
}

func ptr[T any](v T) *T { return &v }

// The step budget's global default for retries (personaTimeoutMaxRetries)
// sits beside the per-persona policy: it sets the persona preset's attempts
// when a persona's policy names none; other presets, and an explicit
// max_attempts, keep theirs. An absent max_attempts is the preset's.
func TestDefaultMaxRetries(t *testing.T) {
	t.Parallel()
	const personas = `
		personas:
			context:
				invoker: {type: demo, demo: echo}
			planner:
				invoker: {type: demo, demo: echo}
				policy: llm
			qa:
				invoker: {type: demo, demo: echo}
				policy: {preset: persona, max_attempts: 2, progress_interval: 1m}
	`
	tests := []struct {
		name     string
		defaults string
		env      map[string]string
		want     map[string]int
	}{
		{"Default", "", nil, map[string]int{"context": 4, "planner": 3, "qa": 2}},
		{"FromFile", "defaults: {max_retries: 5}\n", nil, map[string]int{"context": 6, "planner": 3, "qa": 2}},
		{"ZeroMeansOneAttempt", "defaults: {max_retries: 0}\n", nil, map[string]int{"context": 1, "planner": 3, "qa": 2}},
		{"EnvWinsOverFile", "defaults: {max_retries: 5}\n", map[string]string{"PERSONAQ_DEFAULTS_MAX_RETRIES": "1"},
			map[string]int{"context": 2, "planner": 3, "qa": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := mustParse(t, tt.defaults+dedent(personas), tt.env)
			ps, err := f.Personas(nil)
			require.NoError(t, err)
			got := map[string]int{}
			for _, p := range ps {
				got[p.Name] = p.Policy.MaxAttempts
				if p.Name == "qa" {
					require.Equal(t, time.Minute, p.Policy.ProgressInterval)
				}
			}
			require.Equal(t, tt.want, got)
		})
	}
}
