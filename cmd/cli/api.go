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
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/personaq/personaq/cmd/api"
	"github.com/personaq/personaq/cmd/config"
	"github.com/personaq/personaq/consumers/wire"
)

func init() { register(newAPICmd) }

// apiTokenEnv names the environment variable of the token with every scope.
const apiTokenEnv = "PERSONAQ_API_TOKEN"

type apiFlags struct {
	listen, config, tlsCert, tlsKey string
	memRatio                        float64
}

func newAPICmd(g *globals) *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "api --listen ADDR [--config FILE] [--tls-cert F --tls-key F]",
		Short: "Serve the HTTP API: submit persona requests and await their records from any language",
		Long: `api serves personaq's HTTP API (JSON under /v1, see docs/api.md): submit a
persona request, long-poll its status, stream its output and attempt events,
list requests and served personas. It is stateless: NATS is its only
dependency, and any number of them can run behind a load balancer.

Every route but /healthz needs a bearer token: ` + apiTokenEnv + ` is one with
every scope (named env); the config file's api.tokens are named tokens with
scopes (submit, read, cancel, admin). Tokens are never logged.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAPI(cmd, g, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", config.DefaultAPIListen, "host:port to serve on (default: the config file's api.listen)")
	fl.StringVarP(&f.config, "config", "c", "", "configuration file: nats, topology and api sections (see deployments/personaq.yaml)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate: serve HTTPS (with --tls-key)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	memoryLimitFlag(fl, &f.memRatio)
	return cmd
}

func runAPI(cmd *cobra.Command, g *globals, f apiFlags) error {
	log, err := g.logger()
	if err != nil {
		return err
	}
	restoreMemoryLimit, err := applyMemoryLimit(log, f.memRatio)
	if err != nil {
		return err
	}
	defer restoreMemoryLimit()
	var cfg *config.File
	if f.config != "" {
		if cfg, err = config.Load(f.config, os.LookupEnv); err != nil {
			return err
		}
		f = f.withFile(cmd, cfg.API)
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return fmt.Errorf("invalid flag --tls-cert: --tls-cert and --tls-key go together")
	}
	tokens, err := apiTokens(cfg)
	if err != nil {
		return err
	}
	if len(tokens) == 0 {
		return fmt.Errorf("no API token: set %s (every scope) or api.tokens in --config", apiTokenEnv)
	}
	nc, js, err := apiConnect(cmd, g, cfg)
	if err != nil {
		return err
	}
	defer nc.Close()
	acfg := api.Config{JetStream: js, Tokens: tokens, Logger: &log}
	if cfg != nil {
		acfg.Topology, acfg.IndexSize = cfg.Topology(), cfg.API.IndexSize
	}
	return serveAPI(cmd.Context(), g, acfg, f, log)
}

// withFile takes the file's api section for the flags not given.
func (f apiFlags) withFile(cmd *cobra.Command, c config.APIConfig) apiFlags {
	if !cmd.Flags().Changed("listen") && c.Listen != "" {
		f.listen = c.Listen
	}
	if !cmd.Flags().Changed("tls-cert") && f.tlsCert == "" {
		f.tlsCert, f.tlsKey = c.TLSCert, c.TLSKey
	}
	return f
}

func apiConnect(cmd *cobra.Command, g *globals, cfg *config.File) (*nats.Conn, jetstream.JetStream, error) {
	forever := nats.MaxReconnects(-1) // NATS down is 503 + Retry-After until it is back
	if cfg != nil {
		return serveConnect(cmd.Context(), cmd, g, cfg, forever)
	}
	return g.connect(cmd.Context(), forever)
}

// apiTokens are the file's named tokens and PERSONAQ_API_TOKEN (named env,
// every scope).
func apiTokens(cfg *config.File) ([]api.Token, error) {
	var out []api.Token
	if v := os.Getenv(apiTokenEnv); v != "" {
		out = append(out, api.Token{Name: "env", Secret: v, Scopes: api.AllScopes})
	}
	if cfg == nil {
		return out, nil
	}
	resolved, err := cfg.API.ResolveTokens(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	for _, t := range resolved {
		tok := api.Token{Name: t.Name, Secret: t.Secret}
		for _, s := range t.Scopes {
			tok.Scopes = append(tok.Scopes, api.Scope(s))
		}
		out = append(out, tok)
	}
	return out, nil
}

// serveAPI serves the API on f.listen until ctx ends.
func serveAPI(ctx context.Context, g *globals, cfg api.Config, f apiFlags, log zerolog.Logger) error {
	srv, err := api.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	defer srv.Stop()
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("api: listen %s: %w", f.listen, err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	scheme := "http"
	if f.tlsCert != "" {
		scheme = "https"
	}
	fmt.Fprintf(g.stdout, "personaq api: serving %s://%s/v1\n", scheme, ln.Addr())
	log.Info().Str("addr", ln.Addr().String()).Str("scheme", scheme).Int("tokens", len(cfg.Tokens)).Msg("personaq api serving")
	errc := make(chan error, 1)
	go func() {
		if f.tlsCert != "" {
			errc <- hs.ServeTLS(ln, f.tlsCert, f.tlsKey)
			return
		}
		errc <- hs.Serve(ln)
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("api: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil { // long-polls still waiting: cut them, callers retry
		_ = hs.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("api: %w", err)
	}
	return nil
}

// devAPIToken is PERSONAQ_API_TOKEN, or a random token (generated).
func devAPIToken() (string, bool) {
	if v := os.Getenv(apiTokenEnv); v != "" {
		return v, false
	}
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b), true
}

// devAPI is the API server `personaq dev` mounts on its console listener.
func devAPI(ctx context.Context, js jetstream.JetStream, log zerolog.Logger) (*api.Server, string, bool, error) {
	token, generated := devAPIToken()
	srv, err := api.New(api.Config{JetStream: js, Topology: wire.Topology{},
		Tokens: []api.Token{{Name: "env", Secret: token, Scopes: api.AllScopes}}, Logger: &log})
	if err != nil {
		return nil, "", false, err
	}
	if err := srv.Start(ctx); err != nil {
		return nil, "", false, err
	}
	return srv, token, generated, nil
}
