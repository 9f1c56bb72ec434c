package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

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
	Cluster        *ClusterFlags
	Print          *PrintFlags
	Filename       string
	Key            string
	KubeadmVersion string

	client kubernetes.Interface
	genericiooptions.IOStreams
}

// ValidateResult is what validate prints with -o.
type ValidateResult struct {
	Source string `json:"source"`
	Valid  bool   `json:"valid"`
	clusterconfig.FileReport
}

// NewCmdValidate builds the validate command.
func NewCmdValidate(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &ValidateOptions{Cluster: cluster, Print: NewPrintFlags(), Key: engine.DefaultKey,
		KubeadmVersion: clusterconfig.DefaultKubeadmVersion, IOStreams: streams}
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
			if err := o.Validate(); err != nil {
				return err
			}
			if o.Filename == "" {
				cs, _, err := o.Cluster.Clientset()
				if err != nil {
					return err
				}
				o.client = cs
			}
			return o.Run(cmd)
		},
	}
	cmd.Flags().StringVarP(&o.Filename, "filename", "f", o.Filename, `A kubeadm config file to validate instead of the live document ("-" reads stdin)`)
	cmd.Flags().StringVar(&o.Key, "key", o.Key, "ConfigMap key that holds the ClusterConfiguration")
	cmd.Flags().StringVar(&o.KubeadmVersion, "kubeadm-version", o.KubeadmVersion, "Release of kubeadm whose rules to apply")
	o.Print.AddFlags(cmd)
	return cmd
}

// Validate checks the flags.
func (o *ValidateOptions) Validate() error {
	if err := clusterconfig.CheckKubeadmVersion(o.KubeadmVersion); err != nil {
		return exitcode.Usagef("--kubeadm-version: %w", err)
	}
	return o.Print.Validate()
}

// Run validates and prints every problem.
func (o *ValidateOptions) Run(cmd *cobra.Command) error {
	opts := clusterconfig.ValidateOptions{KubeadmVersion: o.KubeadmVersion}
	var out ValidateResult
	if o.Filename != "" {
		data, err := readFileOrStdin(o.Filename, o.In)
		if err != nil {
			return err
		}
		out.Source = o.Filename
		out.FileReport = *clusterconfig.ValidateFile(data, opts)
	} else {
		t, doc, err := readDocument(cmd.Context(), o.client, o.Cluster, o.Key)
		if err != nil {
			return err
		}
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
