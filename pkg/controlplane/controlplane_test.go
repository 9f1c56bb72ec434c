package controlplane

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
)

// testdata/*.yaml are the manifests kubeadm 1.37.2 writes for node cp-1
// (192.0.2.11:6443) with external etcd.

func TestParseComponents(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    []Component
		wantErr string
	}{
		{[]string{"scheduler", "apiserver"}, []Component{APIServer, Scheduler}, ""},
		{[]string{"kube-controller-manager", "controller-manager"}, []Component{ControllerManager}, ""},
		// etcd goes last, whatever the order given.
		{[]string{"etcd", "kube-scheduler", "apiserver"}, []Component{APIServer, Scheduler, Etcd}, ""},
		{[]string{"kubelet"}, nil, `unknown component "kubelet" (want apiserver, controller-manager, scheduler or etcd)`},
		{nil, nil, "no component given (want apiserver, controller-manager, scheduler or etcd)"},
	} {
		got, err := ParseComponents(tc.in)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if diff := cmp.Diff(tc.want, got); diff != "" || gotErr != tc.wantErr {
			t.Errorf("ParseComponents(%q) = %v, %q; want %v, %q", tc.in, got, gotErr, tc.want, tc.wantErr)
		}
	}
}

func TestProbesOfKubeadmManifests(t *testing.T) {
	for file, want := range map[string]string{
		"kube-apiserver.yaml":          "https://192.0.2.11:6443/livez",
		"kube-controller-manager.yaml": "https://127.0.0.1:10257/healthz",
		"kube-scheduler.yaml":          "https://127.0.0.1:10259/livez",
	} {
		m, err := ReadManifest("testdata/" + file)
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Probe()
		if err != nil {
			t.Fatal(err)
		}
		if p.URL() != want {
			t.Errorf("%s: probe %s, want %s", file, p.URL(), want)
		}
	}
	// After an etcd member's change, the API server must serve again with
	// its storage: its readiness probe, /readyz.
	m, err := ReadManifest("testdata/kube-apiserver.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := m.ReadinessProbe(); err != nil || p.URL() != "https://192.0.2.11:6443/readyz" {
		t.Errorf("kube-apiserver's readiness probe: %v, %v", p.URL(), err)
	}
}

func TestDiscover(t *testing.T) {
	got, err := Discover("testdata", clusterconfig.NodeConfig{Name: "cp-1"})
	if err != nil {
		t.Fatal(err)
	}
	want := clusterconfig.NodeConfig{Name: "cp-1", AdvertiseAddress: "192.0.2.11", BindPort: 6443, ImagePullPolicy: "IfNotPresent"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Discover (-want +got):\n%s", diff)
	}
	// Given values win.
	given := clusterconfig.NodeConfig{Name: "cp-1", AdvertiseAddress: "192.0.2.99", BindPort: 7443}
	if got, _ := Discover("testdata", given); got.AdvertiseAddress != "192.0.2.99" || got.BindPort != 7443 {
		t.Errorf("Discover overrode given values: %+v", got)
	}
	var de *DiscoveryError
	if _, err := Discover(t.TempDir(), clusterconfig.NodeConfig{}); !errors.As(err, &de) {
		t.Errorf("no manifest: %v", err)
	}
	if got, err := Discover(t.TempDir(), given); err != nil || got.AdvertiseAddress != "192.0.2.99" {
		t.Errorf("no manifest, values given: %+v, %v", got, err)
	}
}

func TestSameAsIgnoresFormatting(t *testing.T) {
	a, _ := ReadManifest("testdata/kube-scheduler.yaml")
	b, err := ParseManifest(append([]byte("# a comment\n"), a.Raw...))
	if err != nil {
		t.Fatal(err)
	}
	if !a.SameAs(b) {
		t.Error("a comment makes a manifest differ")
	}
	c, _ := ParseManifest([]byte(string(a.Raw) + "\n"))
	c.Pod.Spec.Containers[0].Command = append(c.Pod.Spec.Containers[0].Command, "--v=2")
	if a.SameAs(c) {
		t.Error("an added argument goes unnoticed")
	}
}

func TestParseMinor(t *testing.T) {
	for v, want := range map[string]string{
		"v1.37.2":         "",
		"v1.38.0-alpha.1": "",
		"v1.36.3":         "",
		"v1.35.9":         "kubeadm 1.35 is not known to render into KUBEADM_INIT_DRYRUN_DIR (without it a dry run writes under /etc/kubernetes/tmp); reconfigure needs 1.36 or later",
		"v2.0.0":          "want a kubeadm 1.x release",
		"garbage":         "want a kubeadm 1.x release",
	} {
		_, err := parseMinor(v)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("parseMinor(%q) = %q, want %q", v, got, want)
		}
	}
}
