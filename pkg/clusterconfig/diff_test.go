package clusterconfig

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDiff(t *testing.T) {
	const v1beta4 = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\n"
	for _, tc := range []struct {
		name string
		a, b string
		want []string
	}{
		{"the same", v1beta4, v1beta4, nil},
		{"the same, laid out otherwise", v1beta4, "kind: ClusterConfiguration\napiVersion: kubeadm.k8s.io/v1beta4\nkubernetesVersion: \"v1.37.2\"\n", nil},
		{"a field added, one changed", v1beta4, "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.3\nclusterName: other\n",
			[]string{"clusterName", "kubernetesVersion"}},
		{"arguments by name, whatever their order",
			v1beta4 + "apiServer:\n  extraArgs:\n  - {name: audit-log-maxage, value: \"30\"}\n  - {name: audit-log-path, value: /var/log/a}\n",
			v1beta4 + "apiServer:\n  extraArgs:\n  - {name: audit-log-path, value: /var/log/a}\n  - {name: audit-log-maxage, value: \"7\"}\n  - {name: audit-log-maxbackup, value: \"3\"}\n",
			[]string{"apiServer.extraArgs.audit-log-maxage", "apiServer.extraArgs.audit-log-maxbackup"}},
		{"an argument list with a name twice is one value",
			v1beta4 + "apiServer:\n  extraArgs:\n  - {name: a, value: \"1\"}\n  - {name: a, value: \"2\"}\n",
			v1beta4 + "apiServer:\n  extraArgs:\n  - {name: a, value: \"1\"}\n",
			[]string{"apiServer.extraArgs"}},
		{"etcd's arguments, and another list as one value",
			v1beta4 + "etcd:\n  local:\n    extraArgs:\n    - {name: quota-backend-bytes, value: \"1\"}\napiServer:\n  certSANs: [a, b]\n",
			v1beta4 + "etcd:\n  local:\n    extraArgs:\n    - {name: quota-backend-bytes, value: \"2\"}\napiServer:\n  certSANs: [a]\n",
			[]string{"apiServer.certSANs", "etcd.local.extraArgs.quota-backend-bytes"}},
		{"a mapping removed, and keys that need quoting",
			v1beta4 + "featureGates:\n  A.B: true\ncontrollerManager:\n  extraVolumes: []\n",
			v1beta4 + "featureGates:\n  A.B: false\n",
			[]string{"controllerManager", `featureGates["A.B"]`}},
		{"v1beta3 arguments are a mapping",
			"apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\napiServer:\n  extraArgs:\n    audit-log-maxage: \"30\"\n",
			"apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\napiServer:\n  extraArgs:\n    audit-log-maxage: \"7\"\n",
			[]string{"apiServer.extraArgs.audit-log-maxage"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Parse([]byte(tc.a))
			if err != nil {
				t.Fatal(err)
			}
			b, err := Parse([]byte(tc.b))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, Diff(a, b)); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
			// Both ways round, the same fields.
			if d := cmp.Diff(tc.want, Diff(b, a)); d != "" {
				t.Errorf("reversed (-want +got)\n%s", d)
			}
		})
	}
}

func TestHash(t *testing.T) {
	if got := Hash([]byte("a")); got != "sha256:ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb" {
		t.Errorf("got %s", got)
	}
}
