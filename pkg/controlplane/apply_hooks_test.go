package controlplane

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Options.Before and Options.Ready are how a component whose health its
// probe cannot tell (an etcd member, whose cluster must take it back) is
// checked: Before right before its manifest is replaced, Ready once it runs
// a manifest, new or put back (every manifest is put back first, then each
// is waited for in turn). Each hook's "no" is handled as a component that
// did not come up.
func TestApplyHooks(t *testing.T) {
	type call struct {
		Hook      string
		Component Component
		Manifest  string // the argument of the manifest on disk when asked
	}
	for _, tc := range []struct {
		name        string
		before      map[Component]error
		ready       map[Component][]error // one answer per call, in turn
		wantCode    exitcode.Code
		wantCalls   []call
		wantOnDisk  map[Component]string
		wantMessage string
	}{
		{
			name:     "asked in turn, each around its own replace",
			wantCode: exitcode.OK,
			wantCalls: []call{
				{"before", APIServer, "--v=0"}, {"ready", APIServer, "--v=2"},
				{"before", Scheduler, "--v=0"}, {"ready", Scheduler, "--v=3"},
			},
			wantOnDisk: map[Component]string{APIServer: "--v=2", Scheduler: "--v=3"},
		},
		{
			name:     "a refusal before the first replace changes nothing, and keeps its code",
			before:   map[Component]error{APIServer: exitcode.Conflictf("refused")},
			wantCode: exitcode.Conflict,
			wantCalls: []call{
				{"before", APIServer, "--v=0"},
			},
			wantMessage: "refused",
		},
		{
			name:     "a refusal after a replace rolls back what was replaced",
			before:   map[Component]error{Scheduler: exitcode.Conflictf("refused")},
			wantCode: exitcode.RolledBack,
			wantCalls: []call{
				{"before", APIServer, "--v=0"}, {"ready", APIServer, "--v=2"},
				{"before", Scheduler, "--v=0"}, {"ready", APIServer, "--v=0"},
			},
			wantMessage: "refused; rolled back kube-apiserver: the node is back on its previous configuration",
		},
		{
			name:     "not ready: rolled back, and asked again on the previous manifest",
			ready:    map[Component][]error{Scheduler: {errors.New("not back"), nil}},
			wantCode: exitcode.RolledBack,
			wantCalls: []call{
				{"before", APIServer, "--v=0"}, {"ready", APIServer, "--v=2"},
				{"before", Scheduler, "--v=0"}, {"ready", Scheduler, "--v=3"},
				{"ready", APIServer, "--v=0"}, {"ready", Scheduler, "--v=0"},
			},
			wantMessage: "not back; rolled back kube-apiserver, kube-scheduler: the node is back on its previous configuration",
		},
		{
			name:     "not ready on its previous manifest either: exit 9 naming it",
			ready:    map[Component][]error{Scheduler: {errors.New("not back"), errors.New("still not back")}},
			wantCode: exitcode.RollbackFailed,
			wantCalls: []call{
				{"before", APIServer, "--v=0"}, {"ready", APIServer, "--v=2"},
				{"before", Scheduler, "--v=0"}, {"ready", Scheduler, "--v=3"},
				{"ready", APIServer, "--v=0"}, {"ready", Scheduler, "--v=0"},
			},
			wantMessage: "not back; the rollback failed: kube-scheduler may be down: still not back",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			var calls []call
			onDisk := func(c Component) string {
				m, err := ReadManifest(n.kubelet.dir + "/" + c.File())
				if err != nil {
					t.Fatal(err)
				}
				return m.Pod.Spec.Containers[0].Command[1]
			}
			_, err := n.apply(map[Component]string{APIServer: "--v=2", Scheduler: "--v=3"}, func(o *Options) {
				o.Before = func(_ context.Context, c Component) error {
					calls = append(calls, call{"before", c, onDisk(c)})
					return tc.before[c]
				}
				o.Ready = func(_ context.Context, c Component) error {
					calls = append(calls, call{"ready", c, onDisk(c)})
					if answers := tc.ready[c]; len(answers) > 0 {
						tc.ready[c] = answers[1:]
						return answers[0]
					}
					return nil
				}
			})
			if got := exitcode.FromError(err); got != tc.wantCode {
				t.Fatalf("exit %d, want %d: %v", got, tc.wantCode, err)
			}
			if tc.wantMessage != "" && fmt.Sprint(err) != tc.wantMessage {
				t.Errorf("message %q, want %q", err, tc.wantMessage)
			}
			if diff := cmp.Diff(tc.wantCalls, calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			n.wantManifests(tc.wantOnDisk)
		})
	}
}
