// Package get prints the ClusterConfiguration stored in kubeadm-config, as
// stored or through kubectl's printers. It reads through pkg/engine and
// writes the --write-config copy with pkg/backup's atomic file writer.
package get

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

const getExample = `  # Print the ClusterConfiguration exactly as stored
  kubectl kubeadmcfg get

  # Print it as JSON
  kubectl kubeadmcfg get -o json

  # Print one field
  kubectl kubeadmcfg get -o jsonpath='{.networking.podSubnet}'`

// Options prints the stored ClusterConfiguration.
type Options struct {
	Timeout     time.Duration
	Cluster     *cmdutil.ClusterFlags
	Print       *cmdutil.PrintFlags
	Key         string
	WriteConfig string

	engine *engine.Engine
	genericiooptions.IOStreams
}

// NewOptions returns options with defaults.
func NewOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *Options {
	return &Options{Cluster: cluster, Print: cmdutil.NewPrintFlags(), Key: engine.DefaultKey, Timeout: engine.DefaultTimeout, IOStreams: streams}
}

// NewCmdGet builds the get command.
func NewCmdGet(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Print the ClusterConfiguration",
		Long: `Print the ClusterConfiguration document from the kubeadm-config ConfigMap.

Without -o the document is printed exactly as stored. With -o yaml, json,
jsonpath or go-template it is decoded first and printed by kubectl's printers.`,
		Example: getExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags binds the options' flags.
func (o *Options) AddFlags(cmd *cobra.Command) {
	o.Print.AddFlags(cmd)
	cmd.Flags().StringVar(&o.Key, "key", o.Key, "ConfigMap key that holds the ClusterConfiguration")
	cmd.Flags().StringVar(&o.WriteConfig, "write-config", o.WriteConfig, "Also write the ClusterConfiguration, as stored, to this file (atomic, 0600)")
	cmdutil.AddTimeoutFlag(cmd, &o.Timeout)
}

// Complete builds the printer and the client.
func (o *Options) Complete(_ *cobra.Command, _ []string) error {
	if err := o.Print.Complete(); err != nil {
		return err
	}
	c, err := o.Cluster.Clients()
	if err != nil {
		return err
	}
	o.engine = engine.New(c.Client, o.Cluster.Target(o.Key), engine.Options{Timeout: o.Timeout})
	return nil
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if strings.TrimSpace(o.Key) == "" {
		return exitcode.Usagef("--key must not be empty")
	}
	return cmdutil.ValidateTimeout(o.Timeout)
}

// Budget bounds the whole command by --timeout.
func (o *Options) Budget() time.Duration { return o.Timeout }

// Run reads and prints the document.
func (o *Options) Run(ctx context.Context) error {
	doc, err := o.engine.Document(ctx)
	if err != nil {
		return err
	}
	if o.WriteConfig != "" {
		if err := backup.WriteFile(o.WriteConfig, []byte(doc)); err != nil {
			return err
		}
	}
	if o.Print.Human() {
		_, err := fmt.Fprint(o.Out, doc)
		return err
	}
	js, err := input.YAMLToJSON([]byte(doc))
	if err == nil && !strings.HasPrefix(strings.TrimSpace(string(js)), "{") {
		err = fmt.Errorf("it is not a mapping")
	}
	if err != nil {
		t := o.engine.Target()
		return exitcode.Invalidf("%s key %q does not hold a YAML document (print it as stored without -o): %w", t, t.Key, err)
	}
	return o.Print.Print(o.Out, js)
}
