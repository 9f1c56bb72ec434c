// Package validate checks the live ClusterConfiguration, or a whole kubeadm
// config file, the way kubeadm does. The rules are pkg/clusterconfig's; the
// live document is read through pkg/engine.
package validate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

const validateExample = `  # Validate the live ClusterConfiguration
  kubectl kubeadmcfg validate

  # Validate every document of a kubeadm config file, as 'kubeadm config validate' does
  kubectl kubeadmcfg validate -f kubeadm.yaml

  # Validate with the rules of the kubeadm release that manages the cluster
  kubectl kubeadmcfg validate --kubeadm-version v1.36.4 -o json`

// Options validates the live document or a file.
type Options struct {
	Timeout        time.Duration
	Cluster        *cmdutil.ClusterFlags
	Print          *cmdutil.PrintFlags
	Filename       string
	Key            string
	KubeadmVersion string

	engine *engine.Engine // nil with -f
	genericiooptions.IOStreams
}

// Result is what validate prints with -o.
type Result struct {
	Source string `json:"source"`
	Valid  bool   `json:"valid"`
	clusterconfig.FileReport
}

// NewOptions returns options with defaults.
func NewOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *Options {
	return &Options{Cluster: cluster, Print: cmdutil.NewPrintFlags(), Key: engine.DefaultKey, Timeout: engine.DefaultTimeout, IOStreams: streams}
}

// NewCmdValidate builds the validate command.
func NewCmdValidate(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:   "validate [-f FILE]",
		Short: "Check a ClusterConfiguration, or a whole kubeadm config file, the way kubeadm does",
		Long: `Check the live ClusterConfiguration, or a whole kubeadm config file, the way
'kubeadm config validate' does: strict decoding against the schema of each
document's apiVersion (unknown fields, duplicate keys, wrong types) and
kubeadm's checks. Every problem is listed with its field path. Exit 0 when
valid, 3 when not.

In a file every document is checked: InitConfiguration, ClusterConfiguration,
JoinConfiguration, ResetConfiguration and UpgradeConfiguration fully;
KubeletConfiguration and KubeProxyConfiguration by strict decoding. Problems
of documents other than the ClusterConfiguration name their document and
line. An empty or comment-only document between "---" lines makes the file
invalid, as it does for kubeadm.

The rules are those of one kubeadm release (--kubeadm-version): its feature
gates, the apiVersions it reads and the oldest control plane it deploys.
By default it is the newest release that reads the file's apiVersions:
kubeadm 1.37 for v1beta4 and v1, kubeadm 1.36 for v1beta3.`,
		Example: validateExample,
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
	cmd.Flags().StringVarP(&o.Filename, "filename", "f", o.Filename, `A kubeadm config file to validate instead of the live document ("-" reads stdin)`)
	cmd.Flags().StringVar(&o.Key, "key", o.Key, "ConfigMap key that holds the ClusterConfiguration")
	cmd.Flags().StringVar(&o.KubeadmVersion, "kubeadm-version", o.KubeadmVersion, "Release of kubeadm whose rules to apply: 1.35, 1.36 or 1.37 (default: the newest that reads the apiVersion, 1.36 for v1beta3)")
	cmdutil.AddTimeoutFlag(cmd, &o.Timeout)
	o.Print.AddFlags(cmd)
}

// Complete builds the printer, and the client unless a file is given.
func (o *Options) Complete(_ *cobra.Command, _ []string) error {
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
func (o *Options) Validate() error {
	if err := clusterconfig.CheckKubeadmVersion(o.KubeadmVersion); err != nil {
		return exitcode.Usagef("--kubeadm-version: %w", err)
	}
	if strings.TrimSpace(o.Key) == "" {
		return exitcode.Usagef("--key must not be empty")
	}
	return cmdutil.ValidateTimeout(o.Timeout)
}

// Budget bounds the whole command by --timeout.
func (o *Options) Budget() time.Duration { return o.Timeout }

// Run validates and prints every problem.
func (o *Options) Run(ctx context.Context) error {
	opts := clusterconfig.ValidateOptions{KubeadmVersion: o.KubeadmVersion}
	var out Result
	if o.engine == nil {
		data, err := cmdutil.ReadInput(o.Filename, "the config file", o.In)
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
		out.FileReport = clusterconfig.FileReport{Report: *clusterconfig.Validate([]byte(doc), opts), Documents: []clusterconfig.DocumentReport{}}
	}
	out.Valid = out.Report.Valid()

	if !o.Print.Human() {
		if err := o.Print.Print(o.Out, out); err != nil {
			return err
		}
	} else {
		cmdutil.PrintWarnings(o.ErrOut, out.Warnings)
		for _, problem := range out.Errors {
			fmt.Fprintln(o.Out, problem)
		}
		if out.Valid {
			fmt.Fprintf(o.Out, "%s: %s is valid%s\n", out.Source, describeValidated(&out.FileReport), forRelease(out.KubeadmRelease))
		}
	}
	if !out.Valid {
		return exitcode.Invalidf("%s: %s is invalid%s (%d problems)", out.Source, describeValidated(&out.FileReport), forRelease(out.KubeadmRelease), len(out.Errors))
	}
	return nil
}

// describeValidated names what was validated: the ClusterConfiguration, or a file's
// documents, those only decoded marked so.
func describeValidated(r *clusterconfig.FileReport) string {
	if len(r.Documents) == 0 {
		if r.APIVersion == "" {
			return "the ClusterConfiguration"
		}
		return fmt.Sprintf("ClusterConfiguration (%s)", r.APIVersion)
	}
	kinds := make([]string, 0, len(r.Documents))
	for _, d := range r.Documents {
		k := d.Kind
		if k == "" {
			k = "no kind"
		}
		if d.Checked == "decoding" {
			k += " (decoded only)"
		}
		kinds = append(kinds, k)
	}
	return fmt.Sprintf("the file (%s)", strings.Join(kinds, ", "))
}

func forRelease(release string) string {
	if release == "" {
		return ""
	}
	return " for kubeadm " + release
}
