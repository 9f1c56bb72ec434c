package upgrade

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// A plan file is refused unexpanded when it holds YAML anchors or aliases,
// and unread past 2 MiB (internal/input.MaxBytes).
func TestParsePlanRefusesAliasesAndLargeInput(t *testing.T) {
	plan, err := os.ReadFile("../../testdata/plans/blue-green.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// A description copied through aliases: 1 KB read, 10 MB decoded.
	bomb := []byte(string(plan) + "# expands\ndescription: &a \"" + strings.Repeat("x", 1000) + "\"\n" +
		"x-b: &b [" + strings.TrimSuffix(strings.Repeat("*a,", 100), ",") + "]\n" +
		"x-c: [" + strings.TrimSuffix(strings.Repeat("*b,", 100), ",") + "]\n")
	lines := strings.Count(string(plan), "\n")
	padded := func(n int) []byte {
		return append(plan, "#"+strings.Repeat("x", n-len(plan)-2)+"\n"...)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string // "" for accepted
	}{
		{"anchors and aliases", bomb, "the plan cannot be used: YAML anchor &a on line " + strconv.Itoa(lines+2) + ": anchors and aliases are not accepted"},
		{"2 MiB", padded(2 << 20), ""},
		{"2 MiB and 1 byte", padded(2<<20 + 1), "the plan cannot be used: larger than 2 MiB, the limit for any input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePlan(tc.data)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want it accepted", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || exitcode.FromError(err) != exitcode.Invalid):
				t.Errorf("got %v (exit %d), want %q (exit 3)", err, exitcode.FromError(err), tc.want)
			}
		})
	}
}
