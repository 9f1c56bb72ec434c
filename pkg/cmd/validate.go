package cmd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

const validateExample = `  # Validate the live ClusterConfiguration
  kubectl kubeadmcfg validate

  # Validate the ClusterConfiguration of a kubeadm config file
  kubectl kubeadmcfg validate -f kubeadm.yaml

  # Validate with the rules of the kubeadm release that manages the cluster
  kubectl kubeadmcfg validate --kubeadm-version v1.36.4 -o json`

// ValidateOptions validates the live document or a file.
type ValidateOptions struct {
	Timeout        time.Duration
	Cluster        *ClusterFlags
	Print          *PrintFlags
	Filename       string
	Key            string
	KubeadmVersion string

	engine *engine.Engine // nil with -f
	genericiooptions.IOStreams
}

// ValidateResult is what validate prints with -o.
type ValidateResult struct {
	Source string `json:"source"`
	Valid  bool   `json:"valid"`
	clusterconfig.FileReport
}

// NewValidateOptions returns options with defaults.
func NewValidateOptions(cluster *ClusterFlags, streams genericiooptions.IOStreams) *ValidateOptions {
	return &ValidateOptions{Cluster: cluster, Print: NewPrintFlags(), Key: engine.DefaultKey,
		KubeadmVersion: clusterconfig.DefaultKubeadmVersion, Timeout: engine.DefaultTimeout, IOStreams: streams}
}

// NewCmdValidate builds the validate command.
func NewCmdValidate(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewValidateOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:   "validate [-f FILE]",
		Short: "Check a ClusterConfiguration the way kubeadm does",
		Long: `Check the live ClusterConfiguration, or the one in a kubeadm config file, the
way kubeadm does: strict decoding against the schema of its apiVersion
(unknown fields, duplicate keys, wrong types) and kubeadm's semantic checks.
Every problem is listed with its field path. Exit 0 when valid, 3 when not.

A file may hold several documents; only its ClusterConfiguration is checked,
and the others are listed as not checked. A file without one is invalid.`,
		Example: validateExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.Context(), o, cmd, args)
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags binds the options' flags.
func (o *ValidateOptions) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.Filename, "filename", "f", o.Filename, `A kubeadm config file to validate instead of the live document ("-" reads stdin)`)
	cmd.Flags().StringVar(&o.Key, "key", o.Key, "ConfigMap key that holds the ClusterConfiguration")
	cmd.Flags().StringVar(&o.KubeadmVersion, "kubeadm-version", o.KubeadmVersion, "Release of kubeadm whose rules to apply")
	addTimeoutFlag(cmd, &o.Timeout)
	o.Print.AddFlags(cmd)
}

// Complete builds the printer, and the client unless a file is given.
func (o *ValidateOptions) Complete(_ *cobra.Command, _ []string) error {
	if err := o.Print.Complete(); err != nil {
		return err
	}
	if o.Filename != "" {
		return nil
	}
	c, err := o.Cluster.Clients()
	if err != nil {
		return err
	}
	o.engine = engine.New(c.Client, o.Cluster.Target(o.Key), engine.Options{Timeout: o.Timeout})
	return nil
}

// Validate checks the flags.
func (o *ValidateOptions) Validate() error {
	if err := clusterconfig.CheckKubeadmVersion(o.KubeadmVersion); err != nil {
		return exitcode.Usagef("--kubeadm-version: %w", err)
	}
	if strings.TrimSpace(o.Key) == "" {
		return exitcode.Usagef("--key must not be empty")
	}
	return validateTimeout(o.Timeout)
}

func (o *ValidateOptions) budget() time.Duration { return o.Timeout }

// Run validates and prints every problem.
func (o *ValidateOptions) Run(ctx context.Context) error {
	opts := clusterconfig.ValidateOptions{KubeadmVersion: o.KubeadmVersion}
	var out ValidateResult
	if o.engine == nil {
		data, err := readInput(o.Filename, "the config file", o.In)
		if err != nil {
			return err
		}
		out.Source = o.Filename
		out.FileReport = *clusterconfig.ValidateFile(data, opts)
	} else {
		doc, err := o.engine.Document(ctx)
		if err != nil {
			return err
		}
		t := o.engine.Target()
		out.Source = fmt.Sprintf("%s/%s key %s", t.Namespace, t.Name, t.Key)
		out.FileReport = clusterconfig.FileReport{Report: *clusterconfig.Validate([]byte(doc), opts), NotChecked: []clusterconfig.FileDocument{}}
	}
	out.Valid = out.Report.Valid()

	if !o.Print.Human() {
		if err := o.Print.Print(o.Out, out); err != nil {
			return err
		}
	} else {
		printWarnings(o.ErrOut, out.Warnings)
		for _, d := range out.NotChecked {
			fmt.Fprintf(o.Out, "not checked: document %d, %s (%s)\n", d.Index, d.Kind, d.APIVersion)
		}
		for _, problem := range out.Errors {
			fmt.Fprintln(o.Out, problem)
		}
		if out.Valid {
			fmt.Fprintf(o.Out, "%s: ClusterConfiguration (%s) is valid\n", out.Source, out.APIVersion)
		}
	}
	if !out.Valid {
		return exitcode.Invalidf("%s: the ClusterConfiguration is invalid (%d problems)", out.Source, len(out.Errors))
	}
	return nil
}
