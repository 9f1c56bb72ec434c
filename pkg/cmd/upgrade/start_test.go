package upgrade

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// TestStartInProgressHint: an upgrade in progress blocks upgrade-start.
// pkg/upgrade says so in its own terms; this layer names the command that
// ends it: upgrade-set with the plan's abort state, or with --force when the
// plan has none. The text is the one users have always seen.
func TestStartInProgressHint(t *testing.T) {
	data, err := os.ReadFile("../../../testdata/plans/blue-green.yaml")
	if err != nil {
		t.Fatal(err)
	}
	noAbort := strings.Split(string(data), "abort:\n")[0] + "hostSteps:" + strings.Split(string(data), "hostSteps:")[1]
	clock := upgradestate.Clock{Now: time.Unix(0, 0), By: "test"}
	for _, tc := range []struct {
		name, plan string
		want       string
	}{
		{"abort state", string(data), "an upgrade from v1.36.4 to v1.37.3 is in state begun; finish or abort it first (upgrade-set abandoning)"},
		{"no abort state", noAbort, "an upgrade from v1.36.4 to v1.37.3 is in state begun; finish or abort it first (upgrade-set --force)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			template, err := upgradestate.ParsePlan([]byte(tc.plan))
			if err != nil {
				t.Fatal(err)
			}
			plan, err := template.Instantiate([]string{"cp-0"})
			if err != nil {
				t.Fatal(err)
			}
			rec, err := upgradestate.Start(nil, plan, clock, "v1.36.4", "v1.37.3", "")
			if err != nil {
				t.Fatal(err)
			}
			_, domain := upgradestate.Start(rec, plan, clock, "v1.37.3", "v1.38.0", "")
			if strings.Contains(domain.Error(), "upgrade-set") || strings.Contains(domain.Error(), "--") {
				t.Errorf("pkg/upgrade names a command or a flag: %q", domain)
			}
			got := (&Flags{}).explain(domain)
			if exitcode.FromError(got) != exitcode.Conflict || exitcode.Message(got) != tc.want {
				t.Fatalf("exit %d, %q; want exit 4, %q", exitcode.FromError(got), exitcode.Message(got), tc.want)
			}
		})
	}
}
