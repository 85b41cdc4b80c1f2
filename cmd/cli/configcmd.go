package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/personaq/personaq/cmd/config"
)

func init() { register(newConfigCmd) }

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Work with configuration files"}
	cmd.AddCommand(&cobra.Command{
		Use:   "check FILE",
		Short: "Validate a configuration file (with env overrides) and print it resolved, secrets redacted",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			cfg, err := config.Load(args[0], os.LookupEnv)
			if err != nil {
				return err
			}
			log, _ := g.logger()
			if _, err := cfg.Personas(&log); err != nil {
				return err
			}
			if err := cfg.CheckInvokers(); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "# %s: valid\n", args[0])
			return cfg.WriteRedacted(g.stdout)
		},
	})
	return cmd
}
