package upgrade

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// A plan file is read with its YAML anchors and aliases, as kubeadm's
// files are, refused unexpanded when its aliases expand it past the bound
// of internal/input, and unread past 2 MiB (internal/input.MaxBytes).
func TestParsePlanBoundsAliasesAndInput(t *testing.T) {
	plan, err := os.ReadFile("../../testdata/plans/blue-green.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// A description copied through aliases: 1 KB read, 10 MB decoded.
	bomb := []byte(string(plan) + "# expands\ndescription: &a \"" + strings.Repeat("x", 1000) + "\"\n" +
		"x-b: &b [" + strings.TrimSuffix(strings.Repeat("*a,", 100), ",") + "]\n" +
		"x-c: [" + strings.TrimSuffix(strings.Repeat("*b,", 100), ",") + "]\n")
	lines := strings.Count(string(plan), "\n")
	// The checking step's failed state, named once and aliased where
	// rolling back follows it.
	withAliases := []byte(strings.NewReplacer("  reaches: checked\n", "  reaches: checked\n  failed: &failed checking-failed\n",
		"after: [checking-failed]", "after: [*failed]").Replace(string(plan)))
	padded := func(n int) []byte {
		return append(plan, "#"+strings.Repeat("x", n-len(plan)-2)+"\n"...)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string // "" for accepted
	}{
		{"anchors and aliases", withAliases, ""},
		{"aliases past the bound", bomb, "the plan cannot be used: YAML alias *b on line " + strconv.Itoa(lines+4) + " expands the document to more than "},
		{"2 MiB", padded(2 << 20), ""},
		{"2 MiB and 1 byte", padded(2<<20 + 1), "the plan cannot be used: larger than 2 MiB, the limit for any input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePlan(tc.data)
			switch {
			case tc.want == "" && err == nil:
				if want, _ := ParsePlan(plan); !reflect.DeepEqual(want, p) {
					t.Errorf("got %+v, want the plan as written in full, %+v", p, want)
				}
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want it accepted", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || exitcode.FromError(err) != exitcode.Invalid):
				t.Errorf("got %v (exit %d), want %q (exit 3)", err, exitcode.FromError(err), tc.want)
			}
		})
	}
}
