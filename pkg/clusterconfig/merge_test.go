package clusterconfig

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

const mergeBase = `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.37.2
clusterName: kubernetes
networking:
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/12
apiServer:
  certSANs:
  - 192.0.2.10
  extraArgs:
  - name: audit-log-maxage
    value: "30"
`

// edited returns mergeBase with ops applied.
func edited(t *testing.T, ops ...op) *Document {
	t.Helper()
	d, err := Parse([]byte(mergeBase))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range ops {
		if err := o.apply(d); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func TestThreeWayMerge(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mine, live []op
		want       []op // applied to mergeBase: the expected result
		conflicts  []string
		merged     []op // with conflicts: the expected MergeConflictError.Merged
	}{{
		name: "nothing changed meanwhile",
		mine: []op{set("clusterName", "mine"), unset("networking.podSubnet")},
		want: []op{set("clusterName", "mine"), unset("networking.podSubnet")},
	}, {
		name: "other fields changed meanwhile: both kept",
		mine: []op{set("clusterName", "mine")},
		live: []op{set("apiServer.extraArgs.v", "2"), set("networking.podSubnet", "10.245.0.0/16")},
		want: []op{set("clusterName", "mine"), set("apiServer.extraArgs.v", "2"), set("networking.podSubnet", "10.245.0.0/16")},
	}, {
		name: "sibling keys of one mapping: merged key by key",
		mine: []op{set("networking.podSubnet", "10.245.0.0/16")},
		live: []op{set("networking.serviceSubnet", "10.97.0.0/16"), set("networking.dnsDomain", "example.local")},
		want: []op{set("networking.podSubnet", "10.245.0.0/16"), set("networking.serviceSubnet", "10.97.0.0/16"), set("networking.dnsDomain", "example.local")},
	}, {
		name: "the same change on both sides is not a conflict",
		mine: []op{set("clusterName", "same"), set("etcd.local.dataDir", "/data")},
		live: []op{set("clusterName", "same")},
		want: []op{set("clusterName", "same"), set("etcd.local.dataDir", "/data")},
	}, {
		name:      "the same field changed to different values",
		mine:      []op{set("clusterName", "mine"), set("networking.podSubnet", "10.245.0.0/16")},
		live:      []op{set("clusterName", "theirs")},
		conflicts: []string{`clusterName: was "kubernetes", edited "mine", live "theirs"`},
		merged:    []op{set("clusterName", "theirs"), set("networking.podSubnet", "10.245.0.0/16")},
	}, {
		name:      "removed in the edit, changed on the live document",
		mine:      []op{unset("networking.podSubnet")},
		live:      []op{set("networking.podSubnet", "10.245.0.0/16")},
		conflicts: []string{`networking.podSubnet: was "10.244.0.0/16", edited (absent), live "10.245.0.0/16"`},
		merged:    []op{set("networking.podSubnet", "10.245.0.0/16")},
	}, {
		name:      "changed inside a mapping the live document removed",
		mine:      []op{set("networking.podSubnet", "10.245.0.0/16")},
		live:      []op{unset("networking")},
		conflicts: []string{`networking: was {"podSubnet":"10.244.0.0/16","serviceSubnet":"10.96.0.0/12"}, edited {"podSubnet":"10.245.0.0/16","serviceSubnet":"10.96.0.0/12"}, live (absent)`},
		merged:    []op{unset("networking")},
	}, {
		name:      "a list is one value: different appends conflict",
		mine:      []op{set("apiServer.certSANs[+]", "mine.example.com")},
		live:      []op{set("apiServer.certSANs[+]", "theirs.example.com")},
		conflicts: []string{`apiServer.certSANs: was ["192.0.2.10"], edited ["192.0.2.10","mine.example.com"], live ["192.0.2.10","theirs.example.com"]`},
		merged:    []op{set("apiServer.certSANs[+]", "theirs.example.com")},
	}, {
		// mergepatch.HasConflicts would see no conflict here (it compares
		// the entry by the edit's keys only), and the edit's list would
		// silently drop the live value.
		name: "a key removed inside a list entry that the live document changed",
		mine: []op{unset("apiServer.extraArgs[0].value")},
		live: []op{set("apiServer.extraArgs[0].value", "60")},
		conflicts: []string{`apiServer.extraArgs: was [{"name":"audit-log-maxage","value":"30"}], edited [{"name":"audit-log-maxage"}], ` +
			`live [{"name":"audit-log-maxage","value":"60"}]`},
		merged: []op{set("apiServer.extraArgs[0].value", "60")},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			base := edited(t)
			edit, err := NewThreeWayMerge(base, edited(t, tc.mine...))
			if err != nil {
				t.Fatal(err)
			}
			live := edited(t, tc.live...)
			liveBefore := live.Clone()
			err = edit.Apply(live)
			if tc.conflicts == nil {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(string(edited(t, tc.want...).MustMarshal()), string(live.MustMarshal())); diff != "" {
					t.Fatalf("merged (-want +got):\n%s", diff)
				}
				return
			}
			var conflict *MergeConflictError
			if !errors.As(err, &conflict) || exitcode.FromError(err) != exitcode.Conflict {
				t.Fatalf("want a conflict (exit 4), got %v", err)
			}
			var got []string
			for _, c := range conflict.Conflicts {
				got = append(got, c.String())
			}
			if diff := cmp.Diff(tc.conflicts, got); diff != "" {
				t.Errorf("conflicts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(string(edited(t, tc.merged...).MustMarshal()), string(conflict.Merged.MustMarshal())); diff != "" {
				t.Errorf("Merged (-want +got):\n%s", diff)
			}
			if !live.Equal(liveBefore) {
				t.Errorf("a conflicting Apply changed the document")
			}
		})
	}
}

// The engine applies the same edit again to every newer copy it reads after
// a write conflict: Apply must keep no state between calls.
func TestThreeWayMergeReapplies(t *testing.T) {
	edit, err := NewThreeWayMerge(edited(t), edited(t, set("clusterName", "mine")))
	if err != nil {
		t.Fatal(err)
	}
	first := edited(t, set("apiServer.extraArgs.v", "2"))
	if err := edit.Apply(first); err != nil {
		t.Fatal(err)
	}
	if err := edit.Apply(edited(t, set("clusterName", "theirs"))); err == nil {
		t.Fatal("want a conflict")
	}
	again := edited(t, set("apiServer.extraArgs.v", "2"))
	if err := edit.Apply(again); err != nil {
		t.Fatal(err)
	}
	if !again.Equal(first) || lookup(t, again, "clusterName") != `"mine"` || lookup(t, again, "apiServer.extraArgs[1].value") != `"2"` {
		t.Fatalf("second application differs:\n%s", again.MustMarshal())
	}
}

func TestThreeWayMergeRefusesTypeChange(t *testing.T) {
	other := edited(t)
	other.tree["apiVersion"] = V1
	_, err := NewThreeWayMerge(edited(t), other)
	if exitcode.FromError(err) != exitcode.Usage {
		t.Fatalf("want a usage error, got %v", err)
	}
	if want := "changing apiVersion is refused (the document stays kubeadm.k8s.io/v1beta4 ClusterConfiguration)"; err.Error() != want {
		t.Fatalf("got %q, want %q", err, want)
	}
}
