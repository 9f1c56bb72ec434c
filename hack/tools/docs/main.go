// Command docs writes the command reference (Markdown, one page per command)
// with cobra's doc generator. It lives in its own module so the generator's
// dependencies stay out of the plugin's go.mod.
//
//	cd hack/tools/docs && go run . ../../../docs/commands
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra/doc"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: docs DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	root := cmd.NewCmdRoot(genericiooptions.NewTestIOStreamsDiscard())
	root.DisableAutoGenTag = true
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
