package cmdutil

import (
	"io"
	"os"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// ReadInput reads a file named on the command line, or stdin for "-". what
// names the file in errors ("the patch file", "the config file"). Several
// verbs take such a file, and all read it, and fail, the same way.
func ReadInput(name, what string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, exitcode.Failuref("read %s from stdin: %w", what, err)
		}
		return data, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, exitcode.Usagef("cannot read %s: %w", what, err)
	}
	return data, nil
}
