package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/personaq/personaq/cmd/config"
)

// ErrPermission is the error of a command the NATS server refused for the
// connection's user; the text around it names the subject.
var ErrPermission = errors.New("NATS permission denied")

// connect dials --nats-url; the error names the URL so "nothing listens
// there" is obvious, and a user without the permission to use JetStream
// gets ErrPermission naming the subject at once, not a timeout.
func (g *globals) connect(ctx context.Context, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	opts = append([]nats.Option{nats.Name("personaq"), nats.Timeout(5 * time.Second)}, opts...)
	nc, err := nats.Connect(g.natsURL, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot reach NATS at %s: %w", redactURL(g.natsURL), err)
	}
	ctx, cancel := watchPermissions(ctx, nc)
	defer cancel(nil)
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream at %s: %w", redactURL(g.natsURL), err)
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("JetStream not available at %s: %w", redactURL(g.natsURL), permissionCause(ctx, err))
	}
	return nc, js, nil
}

// connectCmd connects for cmd and ends cmd's context with the first
// permissions violation the server reports on the connection: nats.go
// hands those to the connection's error handler, not to the request that
// caused them, which would otherwise wait out its deadline and say
// "context deadline exceeded". Return errors through permissionCause.
func (g *globals) connectCmd(cmd *cobra.Command, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	// The violation becomes the command's error: only other asynchronous
	// errors are printed (nats.go's default handler would print it too).
	quiet := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if !errors.Is(err, nats.ErrPermissionViolation) {
			fmt.Fprintln(g.stderr, "personaq: nats:", err)
		}
	})
	nc, js, err := g.connect(cmd.Context(), append([]nats.Option{quiet}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	ctx, _ := watchPermissions(cmd.Context(), nc)
	cmd.SetContext(ctx)
	return nc, js, nil
}

// watchPermissions returns a context that ends, with an ErrPermission
// cause, at the first permissions violation the server reports on nc. The
// connection's previous error handler still gets every error.
func watchPermissions(ctx context.Context, nc *nats.Conn) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	prev := nc.ErrorHandler()
	nc.SetErrorHandler(func(c *nats.Conn, s *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			cancel(fmt.Errorf("%w: %w (the server refused this user; run the command as a NATS user allowed to do it, "+
				"e.g. the admin user of the example deployments)", ErrPermission, err))
		}
		if prev != nil {
			prev(c, s, err)
		}
	})
	return ctx, cancel
}

// permissionCause returns the permissions violation that ended ctx in
// place of err (a cancelled or timed-out request), and err otherwise.
func permissionCause(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); errors.Is(cause, ErrPermission) {
		return cause
	}
	return err
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
