// Command kubectl-kubeadmcfg is a kubectl plugin that edits, backs up and
// restores the kubeadm ClusterConfiguration, and tracks upgrade state, with
// compare-and-swap writes that lose no update.
package main

import (
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := cmd.Run(streams, os.Args[1:]); err != nil {
		if msg := exitcode.Message(err); msg != "" { // exitcode.Quiet says nothing
			fmt.Fprintln(os.Stderr, "error: "+msg)
		}
		crash.Traceback(os.Stderr, err, os.Getenv)
		os.Exit(int(exitcode.FromError(err)))
	}
}
