// Package cmd is the cobra layer of kubectl-kubeadmcfg: one file per verb,
// each with Options that Complete, Validate and Run. The work itself lives in
// the domain packages; this package reads flags, builds clients and prints.
package cmd

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

const rootLong = `Edit, validate, back up and restore the kubeadm ClusterConfiguration stored
in the kube-system/kubeadm-config ConfigMap, and track Kubernetes upgrade
state, through the Kubernetes API.

Every write is a compare-and-swap on the ConfigMap's resourceVersion: on a
conflict the edit is re-applied to the fresh document, so no concurrent
update is lost, and a document kubeadm would reject is never written.

Exit codes: 0 success (also "unchanged" and "skipped"), 1 other error,
2 usage error, 3 invalid configuration, 4 conflict or precondition not met,
5 not found, 6 forbidden or unauthorized.`

// ClusterFlags are the connection flags every verb shares: kubectl's own
// (--kubeconfig, --context, -n, --as, --request-timeout, ...) plus the name of
// the ConfigMap that holds the ClusterConfiguration.
type ClusterFlags struct {
	ConfigFlags *genericclioptions.ConfigFlags
	ConfigMap   string
}

// NewClusterFlags returns the flags with kubeadm's defaults.
func NewClusterFlags() *ClusterFlags {
	cf := genericclioptions.NewConfigFlags(false)
	ns := "kube-system"
	cf.Namespace = &ns
	// Accepted for kubectl's sake, but the plugin does no discovery, so it
	// caches nothing; an empty default keeps help the same on every machine.
	noCache := ""
	cf.CacheDir = &noCache
	return &ClusterFlags{ConfigFlags: cf, ConfigMap: "kubeadm-config"}
}

// AddFlags binds the flags to the root command's persistent flag set.
func (f *ClusterFlags) AddFlags(cmd *cobra.Command) {
	f.ConfigFlags.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().StringVar(&f.ConfigMap, "configmap", f.ConfigMap, "Name of the ConfigMap that holds the ClusterConfiguration")
}

// Namespace is the namespace of the ConfigMaps the plugin works on.
func (f *ClusterFlags) Namespace() string {
	if f.ConfigFlags.Namespace != nil && *f.ConfigFlags.Namespace != "" {
		return *f.ConfigFlags.Namespace
	}
	return "kube-system"
}

// RESTConfig builds the client configuration without discovery: the plugin
// talks to known core and coordination endpoints only.
func (f *ClusterFlags) RESTConfig() (*rest.Config, error) {
	cfg, err := f.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, exitcode.Failuref("cannot load the kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	// Writers under contention retry quickly; client-side throttling would only
	// add latency on top of the server's own flow control.
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "kubectl-kubeadmcfg"
	return cfg, nil
}

// Clientset builds a typed client.
func (f *ClusterFlags) Clientset() (kubernetes.Interface, *rest.Config, error) {
	cfg, err := f.RESTConfig()
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, exitcode.Failuref("cannot build a client: %w", err)
	}
	return cs, cfg, nil
}

// NewCmdRoot builds the command tree.
func NewCmdRoot(streams genericiooptions.IOStreams) *cobra.Command {
	flags := NewClusterFlags()
	root := &cobra.Command{
		Use:   "kubeadmcfg",
		Short: "Safely edit the kubeadm ClusterConfiguration and track upgrade state",
		Long:  rootLong,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl kubeadmcfg",
		},
		SilenceErrors:     true,
		SilenceUsage:      true,
		DisableAutoGenTag: true,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	flags.AddFlags(root)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return exitcode.Usagef("%w (see '%s --help')", err, c.CommandPath())
	})

	root.AddCommand(
		NewCmdGet(flags, streams),
		NewCmdPatch(flags, streams),
		NewCmdValidate(flags, streams),
		NewCmdBackup(flags, streams),
		NewCmdRestore(flags, streams),
		NewCmdVersion(streams),
	)
	root.AddCommand(NewCmdUpgrade(flags, streams)...)
	registerFlagCompletions(root)
	return root
}

// Run executes the plugin with args and returns the error that decides the
// exit code. SIGINT and SIGTERM cancel the command's context, so an
// interrupted write stops between attempts rather than mid-way.
func Run(streams genericiooptions.IOStreams, args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root := NewCmdRoot(streams)
	root.SetArgs(args)
	reached := false
	root.PersistentPreRun = func(*cobra.Command, []string) { reached = true }
	_, err := root.ExecuteContextC(ctx)
	if err != nil && !reached {
		// cobra rejected the command line before any verb ran: an unknown
		// command, a missing argument, a bad flag.
		var typed *exitcode.Error
		if !errors.As(err, &typed) {
			return exitcode.Usagef("%w (see 'kubectl kubeadmcfg --help')", err)
		}
	}
	return err
}
