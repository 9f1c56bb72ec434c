// Package cmdtest holds what the tests of the verb packages under pkg/cmd
// share: the table test of a verb's Validate. Tests only import it.
package cmdtest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// ValidateCase is one set of options and the error Validate must give (""
// for none). Every error is a usage error (exit 2). It is an alias of an
// unnamed struct so that the tables, one line per case, can leave out the
// field names.
type ValidateCase = struct {
	Name string
	Opts interface{ Validate() error }
	Want string
}

// CheckValidate runs Validate on each case's options and compares the
// message a user would see, word for word, and its exit code. Validate does
// no I/O, so these need no cluster.
func CheckValidate(t *testing.T, cases []ValidateCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			err := tc.Opts.Validate()
			got := ""
			if err != nil {
				got = err.Error()
				if code := exitcode.FromError(err); code != exitcode.Usage {
					t.Errorf("exit code %d, want %d", code, exitcode.Usage)
				}
			}
			if diff := cmp.Diff(tc.Want, got); diff != "" {
				t.Errorf("Validate() (-want +got):\n%s", diff)
			}
		})
	}
}
