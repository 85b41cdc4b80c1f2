package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/personaq/personaq/cmd/config"
	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/flow"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/schemas"
)

func init() { register(newStreamsCmd) }

func newStreamsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "streams", Short: "Manage personaq's JetStream streams and consumers"}
	var path string
	initCmd := &cobra.Command{
		Use:   "init [--config FILE]",
		Short: "Create or update the streams, every configured persona's durable consumer and the quarantine's buckets (idempotent)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(path, os.LookupEnv)
			if err != nil {
				return err
			}
			log, _ := g.logger()
			personas, err := cfg.Personas(&log)
			if err != nil {
				return err
			}
			nc, js, err := serveConnect(cmd.Context(), cmd, g, cfg)
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, cancel := watchPermissions(cmd.Context(), nc)
			defer cancel(nil)
			for i := range personas { // provisioning needs no flow control
				personas[i].Limiter, personas[i].Circuit = "", flow.Circuit{}
			}
			rt, err := consumers.New(consumers.Config{WithoutLedger: true, JetStream: js, Topology: cfg.Topology(), Personas: personas})
			if err != nil {
				return err
			}
			if err := rt.Provision(ctx); err != nil {
				return permissionCause(ctx, err)
			}
			t := cfg.Topology().WithDefaults()
			if err := dlq.ProvisionBuckets(ctx, js, t.Replicas, t.Storage); err != nil {
				return fmt.Errorf("quarantine buckets: %w", permissionCause(ctx, err))
			}
			fmt.Fprintf(g.stdout, "streams ready: %s, %s, %s (replicas %d); consumers:", t.RequestsStream, t.QuarantineStream, t.OutcomesStream, t.Replicas)
			for _, p := range personas {
				fmt.Fprintf(g.stdout, " %s", wire.Durable(p.Name))
			}
			fmt.Fprintf(g.stdout, "; quarantine buckets: %s (index), %s (large payloads)\n", schemas.DefaultQuarantineIndexBucket, schemas.DefaultQuarantinePayloadBucket)
			return nil
		},
	}
	initCmd.Flags().StringVarP(&path, "config", "c", "personaq.yaml", "configuration file")
	cmd.AddCommand(initCmd)
	return cmd
}
