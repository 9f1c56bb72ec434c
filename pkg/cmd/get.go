package cmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

const getExample = `  # Print the ClusterConfiguration exactly as stored
  kubectl kubeadmcfg get

  # Print it as JSON
  kubectl kubeadmcfg get -o json

  # Print one field
  kubectl kubeadmcfg get -o jsonpath='{.networking.podSubnet}'`

// GetOptions prints the stored ClusterConfiguration.
type GetOptions struct {
	Cluster     *ClusterFlags
	Print       *PrintFlags
	Key         string
	WriteConfig string

	client kubernetes.Interface
	genericiooptions.IOStreams
}

// NewGetOptions returns options with defaults.
func NewGetOptions(cluster *ClusterFlags, streams genericiooptions.IOStreams) *GetOptions {
	return &GetOptions{Cluster: cluster, Print: NewPrintFlags(), Key: engine.DefaultKey, IOStreams: streams}
}

// NewCmdGet builds the get command.
func NewCmdGet(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewGetOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Print the ClusterConfiguration",
		Long: `Print the ClusterConfiguration document from the kubeadm-config ConfigMap.

Without -o the document is printed exactly as stored. With -o yaml, json,
jsonpath or go-template it is decoded first and printed by kubectl's printers.`,
		Example: getExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd)
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags binds the options' flags.
func (o *GetOptions) AddFlags(cmd *cobra.Command) {
	o.Print.AddFlags(cmd)
	cmd.Flags().StringVar(&o.Key, "key", o.Key, "ConfigMap key that holds the ClusterConfiguration")
	cmd.Flags().StringVar(&o.WriteConfig, "write-config", o.WriteConfig, "Also write the ClusterConfiguration, as stored, to this file (atomic, 0600)")
}

// Complete builds the client.
func (o *GetOptions) Complete() error {
	cs, _, err := o.Cluster.Clientset()
	o.client = cs
	return err
}

// Validate checks the flags.
func (o *GetOptions) Validate() error {
	if strings.TrimSpace(o.Key) == "" {
		return exitcode.Usagef("--key must not be empty")
	}
	return o.Print.Validate()
}

// Run reads and prints the document.
func (o *GetOptions) Run(cmd *cobra.Command) error {
	t, doc, err := readDocument(cmd.Context(), o.client, o.Cluster, o.Key)
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
	js, err := yaml.YAMLToJSON([]byte(doc))
	if err == nil && !strings.HasPrefix(strings.TrimSpace(string(js)), "{") {
		err = fmt.Errorf("it is not a mapping")
	}
	if err != nil {
		return exitcode.Invalidf("%s key %q does not hold a YAML document (print it as stored without -o): %w", t, t.Key, err)
	}
	return o.Print.Print(o.Out, js)
}

// readDocument reads the live ClusterConfiguration under key.
func readDocument(ctx context.Context, client kubernetes.Interface, cluster *ClusterFlags, key string) (engine.Target, string, error) {
	t := engine.Target{Namespace: cluster.Namespace(), Name: cluster.ConfigMap, Key: key}
	cm, err := engine.Get(ctx, client.CoreV1(), t)
	if err != nil {
		return t, "", err
	}
	doc, err := engine.Document(cm, t)
	return t, doc, err
}
