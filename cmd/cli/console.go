package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/personaq/personaq/cmd/console"
	"github.com/personaq/personaq/consumers/ledger"
)

func init() { register(newConsoleCmd) }

// consoleTokenEnv names the environment variable with the console token.
const consoleTokenEnv = "PERSONAQ_CONSOLE_TOKEN"

type consoleFlags struct {
	listen   string
	token    string
	readOnly bool
}

func newConsoleCmd(g *globals) *cobra.Command {
	var f consoleFlags
	cmd := &cobra.Command{
		Use:   "console [--listen 127.0.0.1:8080] [--token T] [--read-only]",
		Short: "Serve the web console: personas, quarantine, tasks, live outcomes",
		Long: `console serves a web console for operators against any personaq deployment
(--nats-url; --redis-url for task timelines, or the ledger of a running
'personaq dev', found through NATS like 'task show' does).

It binds loopback by default. Replay, purge, pause and resume need the token
(--token or PERSONAQ_CONSOLE_TOKEN, at least 16 characters; without one a
random token is made and printed once) and carry CSRF protection;
--read-only hides and refuses them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runConsole(cmd.Context(), g, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", console.DefaultListen, "host:port to serve the console on")
	fl.StringVar(&f.token, "token", os.Getenv(consoleTokenEnv), "token that allows actions (env "+consoleTokenEnv+")")
	fl.BoolVar(&f.readOnly, "read-only", false, "hide and refuse every action")
	return cmd
}

func runConsole(ctx context.Context, g *globals, f consoleFlags) error {
	log, err := g.logger()
	if err != nil {
		return err
	}
	nc, js, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	led, closeLedger := consoleLedger(ctx, g, log)
	defer closeLedger()
	token, generated := consoleToken(f.token, f.readOnly)
	addr, stop, err := startConsole(ctx, f.listen, false, console.Config{
		JetStream: js, Ledger: led, Token: token, ReadOnly: f.readOnly, Logger: &log,
	}, nil, log)
	if err != nil {
		return err
	}
	defer stop()
	announceConsole(g, "personaq console", addr, token, generated)
	<-ctx.Done()
	return nil
}

// consoleToken is the given token, or a random one (generated) when none
// was given and actions are allowed.
func consoleToken(token string, readOnly bool) (string, bool) {
	if token != "" || readOnly {
		return token, false
	}
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b), true
}

// announceConsole prints the URL (and a generated token, once, on stdout:
// never in the logs).
func announceConsole(g *globals, who, addr, token string, generated bool) {
	fmt.Fprintf(g.stdout, "%s: console at http://%s/\n", who, addr)
	if generated {
		fmt.Fprintf(g.stdout, "%s: console token (for actions; set %s to choose one): %s\n", who, consoleTokenEnv, token)
	}
}

// consoleLedger opens --redis-url, or the ledger a running dev announced;
// none is fine (the task page says so).
func consoleLedger(ctx context.Context, g *globals, log zerolog.Logger) (console.Ledger, func()) {
	url := g.redisURL
	if url == "" {
		url, _ = devLedgerURL(ctx, g)
	}
	if url == "" {
		log.Info().Msg("console: no attempt ledger (--redis-url): task timelines are off")
		return nil, func() {}
	}
	client, err := ledger.NewClientURL(url)
	if err != nil {
		log.Warn().Err(err).Msg("console: invalid --redis-url: task timelines are off")
		return nil, func() {}
	}
	l, err := ledger.New(ledger.Config{Client: client})
	if err != nil {
		client.Close()
		return nil, func() {}
	}
	return l, func() { client.Close() }
}

// startConsole serves the console on listen until stop; with fallback, a
// port in use is replaced by a free one on the same host. A non-nil apiH
// (the HTTP API) is served beside it, on /v1/ and /healthz.
func startConsole(ctx context.Context, listen string, fallback bool, cfg console.Config, apiH http.Handler, log zerolog.Logger) (string, func(), error) {
	srv, err := console.New(cfg)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil && fallback && errors.Is(err, syscall.EADDRINUSE) {
		host, _, _ := net.SplitHostPort(listen)
		log.Info().Str("addr", listen).Msg("console: address in use, taking a free port")
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
	}
	if err != nil {
		return "", nil, fmt.Errorf("console: listen %s: %w", listen, err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		log.Warn().Str("addr", ln.Addr().String()).Msg("console: listening beyond loopback; put TLS in front of it")
	}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	srv.Start(base)
	hs := &http.Server{Handler: withAPI(srv.Handler(), apiH), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return base }}
	go func() { _ = hs.Serve(ln) }()
	stop := func() {
		cancel() // ends the live streams
		sctx, done := context.WithTimeout(context.Background(), 3*time.Second)
		defer done()
		_ = hs.Shutdown(sctx)
		srv.Stop()
	}
	return ln.Addr().String(), stop, nil
}

// withAPI routes /v1/ and /healthz to apiH (when set), the rest to h.
func withAPI(h, apiH http.Handler) http.Handler {
	if apiH == nil {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", apiH)
	mux.Handle("/healthz", apiH)
	mux.Handle("/", h)
	return mux
}

// serveDevConsole serves the console of `personaq dev` on addr ("" : off),
// with the HTTP API beside it on /v1/.
func serveDevConsole(ctx context.Context, g *globals, addr string, js jetstream.JetStream, led any, log zerolog.Logger) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	l, _ := led.(console.Ledger)
	token, generated := consoleToken(os.Getenv(consoleTokenEnv), false)
	apiSrv, apiToken, apiGenerated, err := devAPI(ctx, js, log)
	if err != nil {
		return nil, err
	}
	got, stop, err := startConsole(ctx, addr, true, console.Config{JetStream: js, Ledger: l, Token: token, Logger: &log}, apiSrv.Handler(), log)
	if err != nil {
		apiSrv.Stop()
		return nil, err
	}
	announceConsole(g, "personaq dev", got, token, generated)
	announceAPI(g, got, apiToken, apiGenerated)
	return func() { stop(); apiSrv.Stop() }, nil
}

// announceAPI prints where the API is, and its token when it was made
// here (never when PERSONAQ_API_TOKEN chose it; never in the logs).
func announceAPI(g *globals, addr, token string, generated bool) {
	if generated {
		fmt.Fprintf(g.stdout, "personaq dev: API at http://%s/v1 (token: %s)\n", addr, token)
		return
	}
	fmt.Fprintf(g.stdout, "personaq dev: API at http://%s/v1 (token from %s)\n", addr, apiTokenEnv)
}
