package cmd

import (
	"context"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/version"
)

// VersionOptions prints the plugin's build information.
type VersionOptions struct {
	Print *cmdutil.PrintFlags
	genericiooptions.IOStreams
}

// VersionInfo is what `version -o json` prints.
type VersionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// NewVersionOptions returns options with defaults.
func NewVersionOptions(streams genericiooptions.IOStreams) *VersionOptions {
	return &VersionOptions{Print: cmdutil.NewPrintFlags(), IOStreams: streams}
}

// Complete builds the printer.
func (o *VersionOptions) Complete(*cobra.Command, []string) error { return o.Print.Complete() }

// Validate has nothing to check.
func (o *VersionOptions) Validate() error { return nil }

// NewCmdVersion builds the version command.
func NewCmdVersion(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewVersionOptions(streams)
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
func (o *VersionOptions) Run(context.Context) error {
	info := VersionInfo{
		Version: version.Version, Commit: version.Commit, Date: version.Date,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
	if !o.Print.Human() {
		return o.Print.Print(o.Out, info)
	}
	_, err := fmt.Fprintf(o.Out, "kubectl-kubeadmcfg %s (commit %s, built %s, %s, %s)\n",
		info.Version, info.Commit, info.Date, info.GoVersion, info.Platform)
	return err
}
