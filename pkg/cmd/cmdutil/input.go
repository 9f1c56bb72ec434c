package cmdutil

import (
	"errors"
	"io"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// ReadInput reads a file named on the command line, or stdin for "-", of at
// most 2 MiB. what names the file in errors ("the patch file", "the config
// file"). A larger input is refused as invalid (exit 3), as soon as the
// limit is passed: /dev/zero ends. Several verbs take such a file, and all
// read it, and fail, the same way.
func ReadInput(name, what string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		data, err := input.Read(stdin)
		if errors.Is(err, input.ErrTooLarge) {
			return nil, exitcode.Invalidf("%s on stdin is %w", what, err)
		}
		if err != nil {
			return nil, exitcode.Failuref("read %s from stdin: %w", what, err)
		}
		return data, nil
	}
	data, err := input.ReadFile(name)
	if errors.Is(err, input.ErrTooLarge) {
		return nil, exitcode.Invalidf("%s %s is %w", what, name, input.ErrTooLarge)
	}
	if err != nil {
		return nil, exitcode.Usagef("cannot read %s: %w", what, err)
	}
	return data, nil
}
