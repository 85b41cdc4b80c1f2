package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/config"
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

// redactURL hides passwords in a URL or a comma-separated URL list, with
// the config package's rules.
func redactURL(u string) string {
	parts := strings.Split(u, ",")
	for i, p := range parts {
		parts[i] = config.RedactURL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}
