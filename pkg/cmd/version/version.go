// Package version prints the plugin's build information: the version,
// commit and date pkg/version was stamped with at build time, and the Go
// toolchain and platform.
package version

import (
	"context"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	versioninfo "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/version"
)

// Options prints the plugin's build information.
type Options struct {
	Print *cmdutil.PrintFlags
	genericiooptions.IOStreams
}

// Info is what `version -o json` prints.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// NewOptions returns options with defaults.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{Print: cmdutil.NewPrintFlags(), IOStreams: streams}
}

// Complete builds the printer.
func (o *Options) Complete(*cobra.Command, []string) error { return o.Print.Complete() }

// Validate has nothing to check.
func (o *Options) Validate() error { return nil }

// NewCmdVersion builds the version command.
func NewCmdVersion(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print the plugin's version",
		Long:    "Print the version, commit and build date the plugin was built with.",
		Example: "  # Print the version as JSON\n  kubectl kubeadmcfg version -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	o.Print.AddFlags(cmd)
	return cmd
}

// Run prints the version.
func (o *Options) Run(context.Context) error {
	info := Info{
		Version: versioninfo.Version, Commit: versioninfo.Commit, Date: versioninfo.Date,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
	if !o.Print.Human() {
		return o.Print.Print(o.Out, info)
	}
	_, err := fmt.Fprintf(o.Out, "kubectl-kubeadmcfg %s (commit %s, built %s, %s, %s)\n",
		info.Version, info.Commit, info.Date, info.GoVersion, info.Platform)
	return err
}
