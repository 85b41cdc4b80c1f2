package config_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/config"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"NoSecret", "redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"PasswordOnly", "redis://:secret@host:6379", "redis://:***@host:6379"},
		{"UserAndPassword", "nats://user:secret@host:4222", "nats://user:***@host:4222"},
		{"UserOnlyIsKept", "nats://user@host:4222", "nats://user@host:4222"},
		{"EscapedPassword", "redis://:p%40ss@host:6379/2", "redis://:***@host:6379/2"},
		{"SecretQuery", "https://h/x?a=1&api_key=k1&Token=t2&b=2#frag", "https://h/x?a=1&api_key=***&Token=***&b=2#frag"},
		{"PasswordAndQuery", "https://u:p@h/x?password=q", "https://u:***@h/x?password=***"},
		{"NoScheme", "user:secret@host:4222", "***@host:4222"},
		{"Unparseable", "redis://:sec%zzret@host:6379", "redis://***@host:6379"},
		{"Empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, config.RedactURL(tt.in))
		})
	}
}

// TestRedacted: no secret reaches WriteRedacted's output (what `config
// check` prints), Personas' log lines, or the original File.
func TestRedacted(t *testing.T) {
	t.Parallel()
	secrets := []string{
		"natsurlsecret", "bareurlsecret", "natspwsecret", "redisurlsecret", "redispwsecret",
		"httpurlsecret", "querysecret", "headersecret", "envsecret", "tokensecret",
	}
	src := dedent(`
		nats:
			urls: ["nats://u:natsurlsecret@h:4222", "u:bareurlsecret@h2:4222"]
			user: natsuser
			password: natspwsecret
		redis:
			url: "redis://:redisurlsecret@h:6379/0"
		personas:
			planner:
				invoker:
					type: http
					url: "https://agent:httpurlsecret@agents.example/planner?api_key=querysecret&model=big"
					headers: {Authorization: "Bearer headersecret"}
			qa:
				invoker:
					type: command
					path: /usr/local/bin/agent
					env: {API_KEY: envsecret, MODEL: small}
	`)
	f, err := config.Parse([]byte(src), envOf(map[string]string{"PERSONAQ_REDIS_PASSWORD": "redispwsecret"}))
	require.NoError(t, err)

	var out bytes.Buffer
	require.NoError(t, f.WriteRedacted(&out))
	text := out.String()
	for _, s := range secrets {
		require.NotContains(t, text, s)
	}
	for _, kept := range []string{"natsuser", "model=big", "MODEL: '***'", "ttl: 168h\n", "timeout: 10m\n", "Authorization: '***'", "API_KEY: '***'", "redis://:***@h:6379/0", "/usr/local/bin/agent"} {
		require.Contains(t, text, kept)
	}
	require.Equal(t, "natspwsecret", f.NATS.Password, "Redacted must not change the original")
	require.Equal(t, "Bearer headersecret", f.PersonaConfigs["planner"].Invoker.Headers["Authorization"])

	again, err := config.Parse(out.Bytes(), nil)
	require.NoError(t, err, "the redacted output is itself a valid configuration")
	require.Equal(t, config.Redaction, again.NATS.Password)

	var logs bytes.Buffer
	logger := zerolog.New(&logs)
	_, err = f.Personas(&logger)
	require.NoError(t, err)
	require.Contains(t, logs.String(), "persona configured")
	for _, s := range secrets {
		require.NotContains(t, logs.String(), s)
	}

	t.Run("TokenToo", func(t *testing.T) {
		t.Parallel()
		f := mustParse(t, echoOnly, map[string]string{"PERSONAQ_NATS_TOKEN": "tokensecret"})
		var out bytes.Buffer
		require.NoError(t, f.WriteRedacted(&out))
		require.NotContains(t, out.String(), "tokensecret")
		require.Contains(t, out.String(), "token: '***'")
	})
}

// TestErrorsHideSecrets: a bad value holding a secret is reported without
// it.
func TestErrorsHideSecrets(t *testing.T) {
	t.Parallel()
	src := dedent(`
		nats:
			urls: ["http://u:natsurlsecret@h:4222"]
		redis:
			url: "redis://:redisurlsecret@h:6379/notadb"
		personas:
			planner:
				invoker: {type: http, url: "ftp://agent:httpurlsecret@h/x"}
	`)
	_, err := config.Parse([]byte(src), nil)
	got := strings.Join(problems(t, err), "\n")
	require.Len(t, problems(t, err), 3)
	for _, s := range []string{"natsurlsecret", "redisurlsecret", "httpurlsecret"} {
		require.NotContains(t, got, s)
	}
}
