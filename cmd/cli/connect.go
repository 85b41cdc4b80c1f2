package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// connect dials --nats-url; the error names the URL so "nothing listens
// there" is obvious.
func (g *globals) connect(ctx context.Context, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	opts = append([]nats.Option{nats.Name("personaq"), nats.Timeout(5 * time.Second)}, opts...)
	nc, err := nats.Connect(g.natsURL, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot reach NATS at %s: %w", redactURL(g.natsURL), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream at %s: %w", redactURL(g.natsURL), err)
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("JetStream not available at %s: %w", redactURL(g.natsURL), err)
	}
	return nc, js, nil
}

// redactURL hides a password in user:pass@host URLs.
func redactURL(u string) string {
	at := strings.LastIndex(u, "@")
	scheme := strings.Index(u, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return u
	}
	cred := u[scheme+3 : at]
	if i := strings.Index(cred, ":"); i >= 0 {
		return u[:scheme+3] + cred[:i] + ":***" + u[at:]
	}
	return u
}
