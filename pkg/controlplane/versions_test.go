package controlplane

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestImageTag(t *testing.T) {
	for image, want := range map[string]string{
		"registry.k8s.io/kube-apiserver:v1.37.2":           "v1.37.2",
		"localhost:5000/kube-apiserver:v1.37.2":            "v1.37.2",
		"localhost:5000/kube-apiserver":                    "",
		"kube-apiserver":                                   "",
		"registry.k8s.io/etcd:3.7.0-0@sha256:0123abcd":     "3.7.0-0@sha256:0123abcd",
		"registry.k8s.io/kube-apiserver@sha256:0123abcd":   "@sha256:0123abcd",
		"mirror.example.org/k8s/kube-apiserver:v1.37.2-rc": "v1.37.2-rc",
	} {
		if got := imageTag(image); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", image, got, want)
		}
	}
}

func TestPlanImageChanges(t *testing.T) {
	manifest := func(c Component, images ...string) *Manifest {
		var b strings.Builder
		b.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + c.PodName() + "\nspec:\n  containers:\n")
		for i, image := range images {
			name := c.PodName()
			if i > 0 {
				name = "sidecar"
			}
			b.WriteString("  - name: " + name + "\n    image: " + image + "\n")
		}
		m, err := ParseManifest([]byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	plan := &Plan{Changes: []Change{
		{Component: APIServer, Current: manifest(APIServer, "registry.k8s.io/kube-apiserver:v1.37.2"),
			Rendered: manifest(APIServer, "registry.k8s.io/kube-apiserver:v1.38.0")},
		// Another registry, the same tag; a container only one side has.
		{Component: ControllerManager, Current: manifest(ControllerManager, "registry.k8s.io/kube-controller-manager:v1.37.2"),
			Rendered: manifest(ControllerManager, "mirror.example.org/kube-controller-manager:v1.37.2", "busybox:1")},
		{Component: Scheduler, Current: manifest(Scheduler, "registry.k8s.io/kube-scheduler:v1.37.2", "busybox:1"),
			Rendered: manifest(Scheduler, "registry.k8s.io/kube-scheduler:v1.37.2", "busybox")},
	}}
	want := []ImageChange{
		{Component: APIServer, Container: "kube-apiserver", Running: "v1.37.2", Rendered: "v1.38.0"},
		{Component: Scheduler, Container: "sidecar", Running: "1", Rendered: ""},
	}
	got := plan.ImageChanges()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if msg := (&VersionChangeError{Changes: got}).Error(); msg !=
		"the rendered manifests change versions (kube-apiserver: image tag v1.37.2 -> v1.38.0, kube-scheduler container sidecar: image tag 1 -> (none)): upgrade the node with kubeadm instead" {
		t.Errorf("message: %s", msg)
	}
}

func TestCheckKubeadmRelease(t *testing.T) {
	for _, tc := range []struct{ kubeadm, kubernetes, want string }{
		{"v1.37.2", "v1.37.2", ""},
		{"v1.37.2", "v1.37.0", ""},
		{"v1.37.0-rc.1", "1.37.5", ""},
		{"v1.37.2", "ci/v1.37.3-alpha.0.1+abc", ""},
		{"v1.37.2", "v1.38.0", "kubeadm v1.37.2 is of another minor release than kubernetesVersion v1.38.0, and renders its own release's flags: use the kubeadm of the cluster's release"},
		{"v1.38.0", "v1.37.2", "kubeadm v1.38.0 is of another minor release than kubernetesVersion v1.37.2, and renders its own release's flags: use the kubeadm of the cluster's release"},
		{"v1.37.2", "stable-1", `kubernetesVersion "stable-1" names no release to check kubeadm v1.37.2 against: set it to the release the cluster runs`},
		{"v1.37.2", "", `kubernetesVersion "" names no release to check kubeadm v1.37.2 against: set it to the release the cluster runs`},
	} {
		err := CheckKubeadmRelease(tc.kubeadm, tc.kubernetes)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("CheckKubeadmRelease(%q, %q) = %q, want %q", tc.kubeadm, tc.kubernetes, got, tc.want)
		}
	}
}
