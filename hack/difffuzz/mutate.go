package main

import (
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
)

// Mutations of a kubeadm config file: on one document's tree (a field set to
// an interesting value, given another type, removed, or an unknown field
// added), or on the file (an empty, extra or repeated document).

// interesting values by the kind of text a field holds.
var (
	texts = []string{"", " ", "UPPER", "a_b", "x", "/abs/path", "rel/path", "-", "é", "a.b.c", "0"}
	ports = []string{"6443", "+6443", "-1", "0", "65535", "65536", "0x1a0b", "06443", " 6443", "6_443"}
	hosts = []string{"cluster.example", "LB.example", "192.0.2.10", "::1", "[::1]", "2001:db8::1", "host_name", "", "a..b"}
	cidrs = []string{"10.96.0.0/12", "10.96.0.0/11", "10.96.0.0/28", "10.96.0.0/29", "10.244.0.0/16", "10.244.0.0/8",
		"10.244.0.0/18", "10.244.0.0/24", "10.244.0.0/25", "fd00::/108", "fd00::/107", "fd00::/48", "fd00::/112",
		"10.244.0.0/16,fd00::/56", "10.244.0.0/16,10.245.0.0/16", "fec0::/64", "10.0.0.0/33", "10.0.0.1"}
	versions = []string{"v1.37.2", "v1.36.0", "v1.35.0", "v1.34.5", "v1.36.0-rc.1", "1.37.0", "v1.37", "ci/v1.37.0",
		"v1.99.0", "v1.37.2.1", "stable", "latest-1.37", "v1.35.0-alpha.0"}
	gates = []string{"RootlessControlPlane", "NodeLocalCRISocket", "PublicKeysECDSA", "ControlPlaneKubeletLocalMode",
		"NotARealGate", "", "WaitForAllControlPlaneComponents"}
	ints = []any{0, -1, 1, 6443, 65535, 65536, 70000, 2147483648, 1.5, "6443"}
)

// hotspots are fields kubeadm checks, by kind.
var hotspots = map[string][][]string{
	clusterconfig.Kind: {{"controlPlaneEndpoint"}, {"networking", "podSubnet"}, {"networking", "serviceSubnet"},
		{"networking", "dnsDomain"}, {"kubernetesVersion"}, {"certificatesDir"}, {"imageRepository"}, {"encryptionAlgorithm"},
		{"apiServer", "certSANs"}, {"etcd", "local", "dataDir"}, {"clusterName"}},
	clusterconfig.KindInit: {{"localAPIEndpoint", "bindPort"}, {"localAPIEndpoint", "advertiseAddress"}, {"nodeRegistration", "name"},
		{"nodeRegistration", "criSocket"}, {"nodeRegistration", "imagePullPolicy"}, {"certificateKey"}, {"patches", "directory"}},
	clusterconfig.KindJoin: {{"caCertPath"}, {"discovery", "bootstrapToken", "apiServerEndpoint"}, {"discovery", "bootstrapToken", "token"},
		{"discovery", "tlsBootstrapToken"}, {"nodeRegistration", "name"}, {"nodeRegistration", "criSocket"}},
	clusterconfig.KindReset:   {{"criSocket"}, {"certificatesDir"}, {"unmountFlags"}},
	clusterconfig.KindUpgrade: {{"apply", "patches", "directory"}, {"node", "imagePullPolicy"}, {"diff", "contextLines"}},
}

// extraDocuments are whole documents a mutation adds.
var extraDocuments = []string{
	"apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nnodeRegistration:\n  name: controller-0\n",
	"apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    token: abcdef.0123456789abcdef\n    apiServerEndpoint: 192.0.2.10:6443\n    unsafeSkipCAVerification: true\n",
	"apiVersion: kubeadm.k8s.io/v1beta4\nkind: ResetConfiguration\n",
	"apiVersion: kubeadm.k8s.io/v1beta4\nkind: UpgradeConfiguration\n",
	"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n",
	"apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\n",
	"apiVersion: kubeadm.k8s.io/v1beta3\nkind: InitConfiguration\n",
	"apiVersion: example.com/v1\nkind: Foo\n",
	"# just a comment\n",
	"\n",
}

func pick[T any](rng *rand.Rand, s []T) T { return s[rng.IntN(len(s))] }

// mutate returns data with one to three mutations.
func mutate(rng *rand.Rand, data []byte) []byte {
	for range pick(rng, []int{1, 1, 1, 1, 1, 1, 2, 2, 2, 3}) {
		data = mutateOnce(rng, data)
	}
	return data
}

func mutateOnce(rng *rand.Rand, data []byte) []byte {
	docs, err := clusterconfig.SplitFile(data)
	if err != nil || len(docs) == 0 || rng.IntN(6) == 0 {
		return mutateFile(rng, data, docs)
	}
	i := rng.IntN(len(docs))
	var tree map[string]any
	if err := yaml.Unmarshal(docs[i].Data, &tree); err != nil || tree == nil {
		return mutateFile(rng, data, docs)
	}
	mutateTree(rng, tree, docs[i].Kind)
	out, err := yaml.Marshal(tree)
	if err != nil {
		return data
	}
	docs[i].Data = out
	return join(docs)
}

func join(docs []clusterconfig.FileDocument) []byte {
	parts := make([]string, 0, len(docs))
	for _, d := range docs {
		parts = append(parts, strings.TrimSuffix(string(d.Data), "\n")+"\n")
	}
	return []byte(strings.Join(parts, "---\n"))
}

func mutateFile(rng *rand.Rand, data []byte, docs []clusterconfig.FileDocument) []byte {
	switch rng.IntN(4) {
	case 0: // a document added at the end
		return []byte(string(data) + "---\n" + pick(rng, extraDocuments))
	case 1: // a document added in front
		return []byte(pick(rng, extraDocuments) + "---\n" + string(data))
	case 2: // a document repeated
		if len(docs) > 0 {
			return []byte(string(join(docs)) + "---\n" + string(pick(rng, docs).Data))
		}
	}
	// every kubeadm apiVersion swapped for another
	from, to := pick(rng, []string{"v1beta4", "v1beta3", "v1"}), pick(rng, []string{"v1beta4", "v1beta3", "v1", "v1beta2"})
	return []byte(strings.ReplaceAll(string(data), "kubeadm.k8s.io/"+from+"\n", "kubeadm.k8s.io/"+to+"\n"))
}

func mutateTree(rng *rand.Rand, tree map[string]any, kind string) {
	if spots := hotspots[kind]; len(spots) > 0 && rng.IntN(3) > 0 {
		p := pick(rng, spots)
		setIn(tree, p, valueFor(rng, p[len(p)-1]))
		return
	}
	paths := leaves(tree, nil)
	if len(paths) == 0 {
		return
	}
	p := pick(rng, paths)
	switch rng.IntN(5) {
	case 0:
		setIn(tree, p, pick(rng, texts))
	case 1:
		setIn(tree, p, pick(rng, ints))
	case 2:
		setIn(tree, p, pick(rng, []any{true, []any{"a"}, map[string]any{"a": "b"}, nil}))
	case 3: // an unknown field, or a known one in the wrong case
		last := p[len(p)-1]
		name := pick(rng, []string{"bogus", strings.ToUpper(last[:1]) + last[1:]})
		setIn(tree, append(slices.Clone(p[:len(p)-1]), name), "x")
	default:
		deleteIn(tree, p)
	}
	if rng.IntN(4) == 0 && kind == clusterconfig.Kind {
		setIn(tree, []string{"featureGates", pick(rng, gates)}, rng.IntN(2) == 0)
	}
}

func valueFor(rng *rand.Rand, field string) any {
	switch field {
	case "controlPlaneEndpoint", "apiServerEndpoint":
		h := pick(rng, hosts)
		if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") && rng.IntN(2) == 0 {
			h = "[" + h + "]"
		}
		if rng.IntN(3) > 0 {
			return h + ":" + pick(rng, ports)
		}
		return h
	case "podSubnet", "serviceSubnet":
		return pick(rng, cidrs)
	case "kubernetesVersion":
		return pick(rng, versions)
	case "bindPort", "contextLines":
		return pick(rng, ints)
	case "advertiseAddress":
		return pick(rng, []string{"192.0.2.10", "127.0.0.1", "::1", "0.0.0.0", "controller-0", "010.0.0.1", "2001:db8::10"})
	case "criSocket":
		return pick(rng, []string{"unix:///run/containerd/containerd.sock", "/run/crio/crio.sock", "npipe:////./pipe/x", "unixx:///x", "unix", ":x", "tcp://1.2.3.4:5"})
	case "imagePullPolicy":
		return pick(rng, []string{"Always", "IfNotPresent", "Never", "always", ""})
	case "token", "tlsBootstrapToken":
		return pick(rng, []string{"abcdef.0123456789abcdef", "ABCDEF.0123456789abcdef", "abcdef.0123456789abcde", "", "abcdef0123456789abcdef"})
	case "unmountFlags":
		return []any{pick(rng, []string{"MNT_FORCE", "MNT_DETACH", "MNT_EXPIRE", "UMOUNT_NOFOLLOW", "MNT_LAZY"})}
	case "certificateKey":
		return pick(rng, []string{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "0123", "zz", ""})
	case "certSANs":
		return []any{pick(rng, hosts)}
	}
	return pick(rng, texts)
}

// leaves lists the paths of the tree's scalar values and empty containers,
// keys sorted so a seed always gives the same mutations.
func leaves(v any, prefix []string) [][]string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		if prefix == nil {
			return nil
		}
		return [][]string{slices.Clone(prefix)}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out [][]string
	for _, k := range keys {
		if k == "apiVersion" || k == "kind" {
			continue
		}
		out = append(out, leaves(m[k], append(prefix, k))...)
	}
	return out
}

func setIn(tree map[string]any, p []string, v any) {
	for _, k := range p[:len(p)-1] {
		next, ok := tree[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			tree[k] = next
		}
		tree = next
	}
	tree[p[len(p)-1]] = v
}

func deleteIn(tree map[string]any, p []string) {
	for _, k := range p[:len(p)-1] {
		next, ok := tree[k].(map[string]any)
		if !ok {
			return
		}
		tree = next
	}
	delete(tree, p[len(p)-1])
}
