package schemas_test

import (
	"errors"
	"testing"

	"github.com/personaq/personaq/cmd/api"
	"github.com/personaq/personaq/cmd/config"
	"github.com/personaq/personaq/cmd/console"
	"github.com/personaq/personaq/cmd/metrics"
	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/advisory"
	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/consumers/flow"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/saga"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// TestConfigErrorIsOneError builds every package's constructor from an
// empty (so invalid) config, and the config file parser from a file with
// no persona: each refusal must match the one configuration
// error, whichever package's name the caller spells it with.
func TestConfigErrorIsOneError(t *testing.T) {
	tests := []struct {
		name     string
		sentinel error
		build    func() error
	}{
		{"dlq.NewInspector", dlq.ErrInvalidConfig, func() error { _, err := dlq.NewInspector(dlq.InspectorConfig{}); return err }},
		{"advisory.NewListener", advisory.ErrInvalidConfig, func() error { _, err := advisory.NewListener(advisory.Config{}); return err }},
		{"handlers.NewHTTP", handlers.ErrInvalidConfig, func() error { _, err := handlers.NewHTTP(handlers.HTTPConfig{}); return err }},
		{"consumers.New", consumers.ErrInvalidConfig, func() error { _, err := consumers.New(consumers.Config{}); return err }},
		{"saga.NewRunner", saga.ErrInvalidConfig, func() error { _, err := saga.NewRunner(saga.Config{}); return err }},
		{"flow.NewLimiter", flow.ErrInvalidConfig, func() error { _, err := flow.NewLimiter(flow.LimiterConfig{}); return err }},
		{"metrics.NewServer", metrics.ErrInvalidConfig, func() error { _, err := metrics.NewServer(metrics.ServerConfig{}); return err }},
		{"ledger.New", ledger.ErrInvalidConfig, func() error { _, err := ledger.New(ledger.Config{}); return err }},
		{"transport.NewSubscriber", transport.ErrInvalidConfig, func() error { _, err := transport.NewSubscriber(transport.Config{}); return err }},
		{"client.New", client.ErrInvalidConfig, func() error { _, err := client.New(client.Config{}); return err }},
		{"console.New", console.ErrInvalidConfig, func() error { _, err := console.New(console.Config{}); return err }},
		{"api.New", api.ErrInvalidConfig, func() error { _, err := api.New(api.Config{}); return err }},
		{"config.Parse", config.ErrInvalid, func() error {
			_, err := config.Parse([]byte("personas: {}\n"), func(string) (string, bool) { return "", false })
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.build()
			if !errors.Is(err, schemas.ErrInvalidConfig) {
				t.Fatalf("%s: got %v, want an error matching schemas.ErrInvalidConfig", tt.name, err)
			}
			if !errors.Is(err, tt.sentinel) {
				t.Fatalf("%s: got %v, want an error matching the package's ErrInvalidConfig", tt.name, err)
			}
		})
	}
}
