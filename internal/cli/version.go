// opx version.

package cli

import (
	"fmt"

	"github.com/semianalysis/opx/internal/version"
	"github.com/spf13/cobra"
)

func newVersionCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print opx's version and commit",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintln(env.Stdout, version.String())
			return nil
		},
	}
}
