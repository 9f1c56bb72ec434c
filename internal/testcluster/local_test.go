package testcluster

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

func TestLocalNodesRefusesSizes(t *testing.T) {
	for _, n := range []int{-1, 0, MaxLocalNodes + 1} {
		_, err := localNodes(n, EtcdExternal)
		want := "a local control plane has 1 to 3 nodes, not " + strconv.Itoa(n)
		if err == nil || err.Error() != want {
			t.Errorf("localNodes(%d): want error %q, got %v", n, want, err)
		}
	}
}

// The nodes share one network namespace: whatever two of them listen on
// must differ, or the second node's component never starts; and so must
// the metrics of the agent each node's address gives, on loopback with
// them (the agent's default, 10268, is cp-2's kubelet's).
func TestLocalNodesListenApart(t *testing.T) {
	for _, etcd := range []EtcdMode{EtcdExternal, EtcdStacked} {
		t.Run(string(etcd), func(t *testing.T) {
			specs, err := localNodes(MaxLocalNodes, etcd)
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
			claim("port 10248", "cp-0/kubelet")
			if etcd == EtcdExternal {
				claim("port 2379", "etcd")
				claim("port 2380", "etcd/peer")
			}
			healthz := regexp.MustCompile(`^healthzPort: (\d+)\n$`)
			for i, s := range specs {
				if want := "cp-" + strconv.Itoa(i); s.Name != want {
					t.Errorf("node %d is named %q, want %q", i, s.Name, want)
				}
				claim("name "+s.Name, s.Name)
				claim("address "+s.Address, s.Name)
				claim("port "+strconv.Itoa(int(s.BindPort)), s.Name+"/kube-apiserver")
				if etcd == EtcdStacked {
					// The member's loopback ports (TestStackedPatchesMoveEtcdApart).
					claim("port "+strconv.Itoa(2379+10*i), s.Name+"/etcd")
					claim("port "+strconv.Itoa(2381+10*i), s.Name+"/etcd metrics")
				}
				if host, port, err := net.SplitHostPort(s.AgentMetricsAddress); err != nil || host != "127.0.0.1" || port == "0" {
					t.Errorf("%s: the agent's metrics address %q is not a port on 127.0.0.1", s.Name, s.AgentMetricsAddress)
				} else {
					claim("port "+port, s.Name+"/agent metrics")
				}
				if i == 0 {
					for name := range s.Patches {
						if !strings.HasPrefix(name, "etcd") || etcd != EtcdStacked {
							t.Errorf("cp-0 has a patch %s with %s etcd", name, etcd)
						}
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
				// The kubelet's /healthz, which kubeadm writes into the
				// node's config.yaml with this patch.
				if m := healthz.FindStringSubmatch(s.Patches["kubeletconfiguration+merge.yaml"]); m == nil {
					t.Errorf("%s: no kubeletconfiguration patch moving healthzPort: %q", s.Name, s.Patches["kubeletconfiguration+merge.yaml"])
				} else {
					claim("port "+m[1], s.Name+"/kubelet")
				}
				_, hasEtcd := s.Patches["etcd+json.yaml"]
				if hasEtcd != (etcd == EtcdStacked) {
					t.Errorf("%s: etcd patch present %v with %s etcd", s.Name, hasEtcd, etcd)
				}
			}
		})
	}
}

// With a stacked etcd each node's member must listen on loopback ports of
// its own and its API server use that member, whether the member's
// manifest is kubeadm init's or kubeadm join's, whose extra
// --initial-cluster-state shifts the arguments after it: the patches are
// applied as kubeadm applies them, in file name order, to manifests of
// kubeadm's shape.
func TestStackedPatchesMoveEtcdApart(t *testing.T) {
	specs, err := localNodes(MaxLocalNodes, EtcdStacked)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for i, s := range specs {
		for _, joined := range []bool{false, true} {
			etcd := applyPatches(t, s.Patches, "etcd", kubeadmEtcdPod(s.Name, s.Address, joined))
			api := applyPatches(t, s.Patches, "kube-apiserver", kubeadmAPIServerPod())
			cmd := etcd.Spec.Containers[0].Command
			clients, metrics := argValues(cmd, "listen-client-urls"), argValues(cmd, "listen-metrics-urls")
			if got, want := argValues(cmd, "feature-gates"), []string{"InitialCorruptCheck=true,SetMemberLocalAddr=true"}; !slices.Equal(got, want) {
				t.Errorf("%s (joined %v): --feature-gates %q, want %q: a member must connect to its peers from its own address", s.Name, joined, got, want)
			}
			wantClient := fmt.Sprintf("https://127.0.0.1:%d", 2379+10*i)
			wantMetrics := 2381 + 10*i
			if want := []string{wantClient + ",https://" + s.Address + ":2379"}; !slices.Equal(clients, want) {
				t.Errorf("%s (joined %v): --listen-client-urls %q, want %q", s.Name, joined, clients, want)
			}
			if want := []string{fmt.Sprintf("http://127.0.0.1:%d", wantMetrics)}; !slices.Equal(metrics, want) {
				t.Errorf("%s (joined %v): --listen-metrics-urls %q, want %q", s.Name, joined, metrics, want)
			}
			if got := etcd.Spec.Containers[0].Ports[0].ContainerPort; got != int32(wantMetrics) {
				t.Errorf("%s (joined %v): the probes ask port %d, want %d", s.Name, joined, got, wantMetrics)
			}
			if got := argValues(cmd, "initial-cluster-state"); joined != (len(got) == 1) {
				t.Errorf("%s (joined %v): the patches touched --initial-cluster-state: %q", s.Name, joined, got)
			}
			if len(cmd) != len(kubeadmEtcdPod(s.Name, s.Address, joined).Spec.Containers[0].Command) {
				t.Errorf("%s (joined %v): the patches added or lost arguments:\n%s", s.Name, joined, strings.Join(cmd, "\n"))
			}
			// kube-apiserver appends every --etcd-servers it is given.
			if got := argValues(api.Spec.Containers[0].Command, "etcd-servers"); !slices.Equal(got, []string{wantClient}) {
				t.Errorf("%s: the API server's --etcd-servers %q, want only its own member's %q", s.Name, got, wantClient)
			}
		}
		for _, port := range []int{2379 + 10*i, 2381 + 10*i} {
			if other, ok := seen[strconv.Itoa(port)]; ok {
				t.Errorf("%s and %s both use port %d", other, s.Name, port)
			}
			seen[strconv.Itoa(port)] = s.Name
		}
	}
}

// applyPatches applies the patches of target to pod as kubeadm does: every
// file target[suffix][+type].yaml, in file name order.
func applyPatches(t *testing.T, patches map[string]string, target string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	data, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(patches))
	for name := range patches {
		if strings.HasPrefix(name, target+".") || strings.HasPrefix(name, target+"+") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		patch, err := yaml.YAMLToJSON([]byte(patches[name]))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Contains(name, "+json.") {
			p, err := jsonpatch.DecodePatch(patch)
			if err == nil {
				data, err = p.Apply(data)
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			continue
		}
		if data, err = strategicpatch.StrategicMergePatch(data, patch, corev1.Pod{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	var out corev1.Pod
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// kubeadmEtcdPod has the arguments kubeadm 1.37 gives a member, sorted as
// kubeadm sorts them (getEtcdCommand), and its probe port.
func kubeadmEtcdPod(name, address string, joined bool) *corev1.Pod {
	cmd := []string{"etcd",
		"--advertise-client-urls=https://" + address + ":2379",
		"--cert-file=/etc/kubernetes/pki/etcd/server.crt",
		"--client-cert-auth=true",
		"--data-dir=/var/lib/etcd",
		"--feature-gates=InitialCorruptCheck=true",
		"--initial-advertise-peer-urls=https://" + address + ":2380",
		"--initial-cluster=" + name + "=https://" + address + ":2380",
	}
	if joined {
		cmd = append(cmd, "--initial-cluster-state=existing")
	}
	cmd = append(cmd,
		"--key-file=/etc/kubernetes/pki/etcd/server.key",
		"--listen-client-urls=https://127.0.0.1:2379,https://"+address+":2379",
		"--listen-metrics-urls=http://127.0.0.1:2381",
		"--listen-peer-urls=https://"+address+":2380",
		"--name="+name,
		"--snapshot-count=10000",
	)
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "etcd", Command: cmd, Ports: []corev1.ContainerPort{{Name: "probe-port", ContainerPort: 2381}},
	}}}}
}

// kubeadmAPIServerPod has kubeadm's --etcd-* arguments for a stacked etcd
// among others, sorted.
func kubeadmAPIServerPod() *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "kube-apiserver", Command: []string{"kube-apiserver",
			"--advertise-address=192.0.2.12",
			"--etcd-cafile=/etc/kubernetes/pki/etcd/ca.crt",
			"--etcd-certfile=/etc/kubernetes/pki/apiserver-etcd-client.crt",
			"--etcd-keyfile=/etc/kubernetes/pki/apiserver-etcd-client.key",
			"--etcd-servers=https://127.0.0.1:2379",
			"--secure-port=6444",
		},
	}}}}
}

// argValues are the values of every --name=value in args, in order.
func argValues(args []string, name string) []string {
	var out []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			out = append(out, v)
		}
	}
	return out
}
