package reconfigure

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// externalEtcd is document with an external etcd: kubeadm renders no etcd
// manifest for it.
const externalEtcd = document + "etcd:\n  external:\n    endpoints:\n    - https://192.0.2.20:2379\n"

// Review R1, scenario B: reconfigure does not change etcd, so a node whose
// etcd manifest would change is never recorded as running the
// configuration (its last known good), and the run says so. The flags etcd
// reads only when its data directory is empty are taken from the running
// manifest: kubeadm renders them for a first member, while a member that
// joined runs with the whole cluster's.
func TestRunNeverRecordsALastKnownGoodWhileEtcdDiffers(t *testing.T) {
	joined := "cp-1=https://192.0.2.12:2380,cp-0=https://192.0.2.11:2380"
	alone := "cp-0=https://192.0.2.11:2380"
	for _, tc := range []struct {
		name              string
		doc               string
		running, rendered string // the etcd manifests, "" for none
		recorded          bool
		warnings          []string
		rendersEtcd       bool
	}{
		{"etcd as rendered, on a member that joined", document,
			etcd(joined, "existing", "10000"), etcd(alone, "", "10000"), true, nil, true},
		{"an etcd setting not applied", document,
			etcd(joined, "existing", "10000"), etcd(alone, "", "12345"), false,
			[]string{"etcd would change (adds --snapshot-count=12345, removes --snapshot-count=10000), but reconfigure does not change etcd: not recorded as the last known good"},
			true},
		{"etcd that cannot be rendered", document,
			etcd(alone, "", "10000"), "", false,
			[]string{"not recorded as the last known good: cannot compare etcd with its rendered manifest: kubeadm could not render the etcd manifest: exit status 1: "},
			true},
		{"external etcd, whatever runs", externalEtcd,
			etcd(alone, "", "10000"), etcd(alone, "", "12345"), true, nil, false},
		{"no etcd manifest on the node", document,
			"", etcd(alone, "", "12345"), true, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t, tc.doc)
			if tc.running != "" {
				n.running("etcd.yaml", n.port2(tc.running))
			}
			if tc.rendered != "" {
				n.rendered("etcd.yaml", n.port2(tc.rendered))
			}
			rep, err := Run(context.Background(), n.request())
			if err != nil {
				t.Fatal(err)
			}
			if recorded := rep.LastKnownGood != ""; recorded != tc.recorded {
				t.Errorf("recorded as the last known good: %v, want %v", recorded, tc.recorded)
			}
			var warnings []string
			for i, w := range rep.Warnings {
				msg := exitcode.Message(w)
				if i < len(tc.warnings) && strings.HasSuffix(tc.warnings[i], ": ") && strings.HasPrefix(msg, tc.warnings[i]) {
					msg = tc.warnings[i] // kubeadm's own words follow
				}
				warnings = append(warnings, msg)
			}
			if diff := cmp.Diff(tc.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if rendered := strings.Contains(n.calls(), "init phase etcd local"); rendered != tc.rendersEtcd {
				t.Errorf("etcd rendered: %v, want %v; kubeadm ran:\n%s", rendered, tc.rendersEtcd, n.calls())
			}
		})
	}
}

// etcd is an etcd manifest, its probe port left as PORT.
func etcd(initialCluster, state, snapshotCount string) string {
	return (&testNode{port: "PORT"}).etcdManifest(initialCluster, state, snapshotCount)
}

// port2 puts the node's probe port into a manifest made by etcd.
func (n *testNode) port2(m string) string { return strings.ReplaceAll(m, "PORT", n.port) }
