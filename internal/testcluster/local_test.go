package testcluster

import (
	"regexp"
	"strconv"
	"testing"
)

func TestLocalNodesRefusesSizes(t *testing.T) {
	for _, n := range []int{-1, 0, MaxLocalNodes + 1} {
		_, err := localNodes(n)
		want := "a local control plane has 1 to 3 nodes, not " + strconv.Itoa(n)
		if err == nil || err.Error() != want {
			t.Errorf("localNodes(%d): want error %q, got %v", n, want, err)
		}
	}
}

// The nodes share one network namespace: whatever two of them listen on
// must differ, or the second node's component never starts.
func TestLocalNodesListenApart(t *testing.T) {
	specs, err := localNodes(MaxLocalNodes)
	if err != nil {
		t.Fatal(err)
	}
	flag := regexp.MustCompile(`value: --secure-port=(\d+)\n`)
	container := regexp.MustCompile(`path: /spec/containers/0/ports/0/containerPort\n  value: (\d+)\n`)
	seen := map[string]string{}
	claim := func(what, by string) {
		t.Helper()
		if other, ok := seen[what]; ok {
			t.Errorf("%s and %s both use %s", other, by, what)
		}
		seen[what] = by
	}
	// Node 0 keeps kubeadm's ports.
	claim("port 10257", "cp-0/kube-controller-manager")
	claim("port 10259", "cp-0/kube-scheduler")
	for i, s := range specs {
		if want := "cp-" + strconv.Itoa(i); s.Name != want {
			t.Errorf("node %d is named %q, want %q", i, s.Name, want)
		}
		claim("name "+s.Name, s.Name)
		claim("address "+s.Address, s.Name)
		claim("port "+strconv.Itoa(int(s.BindPort)), s.Name+"/kube-apiserver")
		if i == 0 {
			if len(s.Patches) != 0 {
				t.Errorf("cp-0 has patches: %v", s.Patches)
			}
			continue
		}
		for _, c := range []string{"kube-controller-manager", "kube-scheduler"} {
			patch := s.Patches[c+"+json.yaml"]
			f, p := flag.FindStringSubmatch(patch), container.FindStringSubmatch(patch)
			if f == nil || p == nil || f[1] != p[1] {
				t.Errorf("%s/%s: the patch must move --secure-port and the probes' container port alike:\n%s", s.Name, c, patch)
				continue
			}
			claim("port "+f[1], s.Name+"/"+c)
		}
	}
}
