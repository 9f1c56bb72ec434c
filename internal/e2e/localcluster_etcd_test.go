package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// hack/localcluster run --etcd stacked: three etcd members built as kubeadm
// builds them, each run by its node's static Pod runner from kubeadm's
// manifest. The members serve only inside the run's namespace, so this test
// binary runs again as the run's command and checks the cluster from
// there (stackedEtcdInside); from outside it checks the run's outcome and
// that nothing outlives it.

func TestLocalClusterStackedEtcd(t *testing.T) {
	if testcluster.InTestNetns() {
		stackedEtcdInside(t)
		return
	}
	inOwnCluster(t) // its clusters run in namespaces of their own
	tool := filepath.Join(s.binDir, "localcluster")

	t.Run("an unknown --etcd is refused with exit 2, before anything starts", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "cluster")
		r := runLong(t, time.Minute, tool, "run", "--etcd", "local", "--dir", dir, "--", "sh", "-c", "echo CMD RAN")
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		if r.code != 2 || len(lines) != 1 || !strings.Contains(lines[0], `--etcd must be stacked or external, not "local"`) {
			t.Errorf("want exit 2 and one line naming --etcd, got %s", r)
		}
		if strings.Contains(r.stdout, "CMD RAN") {
			t.Errorf("the command ran")
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was created: %v", dir, err)
		}
	})

	dir := keptDir(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The run's command gets none of the namespace variables of an
	// enclosing run: env marks this one as the test's own.
	cmd := exec.Command(tool, "run", "--nodes", "3", "--etcd", "stacked", "--dir", filepath.Join(dir, "cluster"), "--",
		"env", testcluster.NetnsEnv+"=1", self, "-test.run", "^TestLocalClusterStackedEtcd$", "-test.v", "-test.count=1", "-test.timeout", "6m")
	p := startProcess(t, cmd)
	r := p.wait(t, 10*time.Minute)
	for _, line := range strings.Split(strings.TrimRight(r.stdout, "\n"), "\n") {
		t.Log("inside: " + line)
	}
	if r.code != 0 || !strings.Contains(r.stdout, "--- PASS: TestLocalClusterStackedEtcd") {
		t.Fatalf("the checks inside the run failed: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	if m := regexp.MustCompile(`cp-0 cp-1 cp-2 up in (\S+)`).FindStringSubmatch(r.stderr); m != nil {
		t.Logf("a 3-node control plane with stacked etcd started in %s (run's own figure)", m[1])
	} else {
		t.Errorf("run did not say the nodes were up:\n%s", r.stderr)
	}
	if left := processesNaming(t, dir); left != "" {
		t.Errorf("processes outlived run:\n%s", left)
	}
}

// stackedNode is one node of the run, from its variables.
type stackedNode struct {
	name, address, dir, manifests string
	member                        *testcluster.EtcdMember
}

// stackedEtcdInside checks the run's etcd from inside its namespaces.
func stackedEtcdInside(t *testing.T) {
	names := strings.Fields(os.Getenv("LOCALCLUSTER_NODES"))
	if len(names) != 3 || os.Getenv("LOCALCLUSTER_ETCD") != "stacked" {
		t.Fatalf("want 3 nodes with stacked etcd, got LOCALCLUSTER_NODES=%q LOCALCLUSTER_ETCD=%q",
			os.Getenv("LOCALCLUSTER_NODES"), os.Getenv("LOCALCLUSTER_ETCD"))
	}
	var nodes []stackedNode
	for i, name := range names {
		v := func(k string) string { return os.Getenv(fmt.Sprintf("LOCALCLUSTER_%d_%s", i, k)) }
		n := stackedNode{name: name, address: v("ADDRESS"), dir: v("DIR"), manifests: v("MANIFESTS")}
		m, err := testcluster.ReadEtcdMember(n.dir, filepath.Join(n.manifests, "etcd.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if want := "https://" + n.address + ":2379"; m.ClientURL != want || v("ETCD_ENDPOINT") != want {
			t.Errorf("%s: the member advertises %s and LOCALCLUSTER_%d_ETCD_ENDPOINT is %q, want %s", name, m.ClientURL, i, v("ETCD_ENDPOINT"), want)
		}
		n.member = m
		nodes = append(nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var endpoints []string
	for _, n := range nodes {
		endpoints = append(endpoints, n.member.ClientURL)
	}
	cli := etcdClient(t, nodes[0].member, endpoints...)

	// Three started voting members, named after their nodes, on their
	// nodes' addresses.
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]uint64{}
	got := map[string]string{}
	for _, m := range list.Members {
		if m.IsLearner || len(m.ClientURLs) == 0 {
			t.Errorf("member %q (%x) is a learner (%v) or not started (client URLs %q)", m.Name, m.ID, m.IsLearner, m.ClientURLs)
		}
		got[m.Name] = strings.Join(m.PeerURLs, ",") + " " + strings.Join(m.ClientURLs, ",")
		ids[m.Name] = m.ID
	}
	want := map[string]string{}
	for _, n := range nodes {
		want[n.name] = fmt.Sprintf("https://%s:2380 https://%s:2379", n.address, n.address)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("member list (-want +got):\n%s", diff)
	}

	// Every member healthy, no alarms, one leader.
	leaders := map[uint64]bool{}
	for _, n := range nodes {
		st, err := cli.Status(ctx, n.member.ClientURL)
		if err != nil || len(st.Errors) > 0 {
			t.Fatalf("%s: status %v, %v", n.name, st, err)
		}
		leaders[st.Leader] = true
	}
	if alarms, err := cli.AlarmList(ctx); err != nil || len(alarms.Alarms) > 0 {
		t.Errorf("alarms %v, %v", alarms, err)
	}
	if len(leaders) != 1 {
		t.Errorf("the members name %d leaders", len(leaders))
	}

	// Each member runs from its node's manifest, as kubeadm rendered it:
	// init's for the first, join's for the others; each API server uses its
	// own node's member.
	procs := processArgs(t)
	for i, n := range nodes {
		etcdArgs := manifestCommand(t, filepath.Join(n.manifests, "etcd.yaml"))
		wantArgs := rootPaths(n.dir, etcdArgs)
		if c := countProcesses(procs, "etcd", wantArgs); c != 1 {
			t.Errorf("%s: want one etcd process with its manifest's arguments, paths in %s, found %d; want\n%s\namong\n%s",
				n.name, n.dir, c, strings.Join(wantArgs, " "), describeProcesses(procs, "etcd"))
		}
		if got, want := flagValues(wantArgs, "data-dir"), []string{filepath.Join(n.dir, "var", "lib", "etcd")}; !slices.Equal(got, want) {
			t.Errorf("%s: --data-dir %q, want %q", n.name, got, want)
		}
		if _, err := os.Stat(filepath.Join(n.dir, "var", "lib", "etcd", "member", "wal")); err != nil {
			t.Errorf("%s: no etcd data in the node's root: %v", n.name, err)
		}
		var joined []string
		for _, m := range nodes[:i+1] {
			joined = append(joined, m.name+"=https://"+m.address+":2380")
		}
		cluster, state := flagValues(etcdArgs, "initial-cluster"), flagValues(etcdArgs, "initial-cluster-state")
		if len(cluster) != 1 || !sameElements(strings.Split(cluster[0], ","), joined) {
			t.Errorf("%s: --initial-cluster %q, want the members %q", n.name, cluster, joined)
		}
		if wantState := map[bool][]string{true: nil, false: {"existing"}}[i == 0]; !slices.Equal(state, wantState) {
			t.Errorf("%s: --initial-cluster-state %q, want %q", n.name, state, wantState)
		}
		apiArgs := rootPaths(n.dir, manifestCommand(t, filepath.Join(n.manifests, "kube-apiserver.yaml")))
		if got, want := flagValues(apiArgs, "etcd-servers"), []string{n.member.LocalClientURL}; !slices.Equal(got, want) {
			t.Errorf("%s: the API server's --etcd-servers %q, want its member's loopback URL %q", n.name, got, want)
		}
		if c := countProcesses(procs, "kube-apiserver", apiArgs); c != 1 {
			t.Errorf("%s: want one kube-apiserver with its manifest's arguments, found %d", n.name, c)
		}
	}

	// The API through the load balancer, its ConfigMap in every member,
	// the etcd mirror Pods Ready.
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(cfg)
	nodeList, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodeList.Items) != 3 {
		t.Fatalf("nodes through the load balancer: %v, %v", nodeList, err)
	}
	for _, n := range nodes {
		own := etcdClient(t, n.member)
		resp, err := own.Get(ctx, "/registry/configmaps/kube-system/kubeadm-config")
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("%s: kubeadm-config in etcd: %v, %v", n.name, resp, err)
		}
		if v := string(resp.Kvs[0].Value); !strings.Contains(v, "kind: ClusterConfiguration") || !strings.Contains(v, "dataDir: /var/lib/etcd") {
			t.Errorf("%s: kubeadm-config in etcd holds no ClusterConfiguration with etcd.local:\n%q", n.name, v)
		}
		pod, err := admin.CoreV1().Pods("kube-system").Get(ctx, "etcd-"+n.name, metav1.GetOptions{})
		if err != nil || !podReady(pod) || pod.Annotations["kubeadm.kubernetes.io/etcd.advertise-client-urls"] != n.member.ClientURL {
			t.Errorf("%s: etcd mirror Pod not Ready with its advertised client URL: %v, %v", n.name, pod, err)
		}
	}

	// One member killed, and kept down as a kubelet keeps a static Pod
	// whose manifest is gone: the other two keep quorum, and their API
	// servers keep serving writes.
	victim := nodes[2]
	manifest := filepath.Join(victim.manifests, "etcd.yaml")
	aside := filepath.Join(victim.manifests, ".etcd.yaml.down")
	pid := processID(procs, "etcd", rootPaths(victim.dir, manifestCommand(t, manifest)))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s's etcd (pid %d): %v", victim.name, pid, err)
	}
	if err := os.Rename(manifest, aside); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s's etcd (pid %d) and moved its manifest aside", victim.name, pid)
	waitFor(t, ctx, victim.name+"'s member down", func() error {
		if processID(processArgs(t), "etcd", []string{"--name=" + victim.name}) != 0 {
			return errors.New("its process runs")
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := cli.Status(sctx, victim.member.ClientURL); err == nil {
			return errors.New("it answers")
		}
		return nil
	})
	if _, err := etcdClient(t, nodes[0].member).Put(ctx, "/kubeadmcfg-e2e/quorum", victim.name+" down"); err != nil {
		t.Fatalf("a write through %s's member with %s's down: %v", nodes[0].name, victim.name, err)
	}
	for i, n := range nodes[:2] {
		c := *cfg
		c.Host = fmt.Sprintf("https://%s:%d", n.address, 6443+i)
		api := kubernetes.NewForConfigOrDie(&c)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "written-through-" + n.name, Namespace: "default"}}
		if _, err := api.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Errorf("a write through %s's API server with %s's member down: %v", n.name, victim.name, err)
		}
	}

	// Back with its manifest: the same member, caught up.
	if err := os.Rename(aside, manifest); err != nil {
		t.Fatal(err)
	}
	back := etcdClient(t, victim.member)
	waitFor(t, ctx, victim.name+"'s member back", func() error {
		gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		st, err := back.Get(gctx, "/kubeadmcfg-e2e/quorum")
		if err != nil {
			return err
		}
		if len(st.Kvs) != 1 || string(st.Kvs[0].Value) != victim.name+" down" {
			return fmt.Errorf("it has not caught up: %v", st.Kvs)
		}
		if st.Header.MemberId != ids[victim.name] {
			return fmt.Errorf("it answers as member %x, not %x", st.Header.MemberId, ids[victim.name])
		}
		pod, err := admin.CoreV1().Pods("kube-system").Get(ctx, "etcd-"+victim.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !podReady(pod) {
			return errors.New("its mirror Pod is not Ready")
		}
		return nil
	})
}

// etcdClient is a client of endpoints (the member's own when none) with the
// member's node's healthcheck-client certificate, closed when the test ends.
func etcdClient(t *testing.T, m *testcluster.EtcdMember, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := m.Client(endpoints...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// waitFor retries check every 200ms until it passes or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, check func() error) {
	t.Helper()
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// processArgs maps the namespace's processes to their argument lists.
func processArgs(t *testing.T) map[int][]string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(data) == 0 {
			continue
		}
		out[pid] = strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
	}
	return out
}

// processID is the process of program whose arguments hold every one of
// args (0 when there is none).
func processID(procs map[int][]string, program string, args []string) int {
	for pid, argv := range procs {
		if filepath.Base(argv[0]) == program && containsAll(argv[1:], args) {
			return pid
		}
	}
	return 0
}

// countProcesses counts the processes of program run with exactly args.
func countProcesses(procs map[int][]string, program string, args []string) int {
	n := 0
	for _, argv := range procs {
		if filepath.Base(argv[0]) == program && slices.Equal(argv[1:], args) {
			n++
		}
	}
	return n
}

func describeProcesses(procs map[int][]string, program string) string {
	var out []string
	for pid, argv := range procs {
		if filepath.Base(argv[0]) == program {
			out = append(out, fmt.Sprintf("%d: %s", pid, strings.Join(argv, " ")))
		}
	}
	return strings.Join(out, "\n")
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func sameElements(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// manifestCommand is a static Pod manifest's command without the program.
func manifestCommand(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal(data, &pod); err != nil || len(pod.Spec.Containers) != 1 {
		t.Fatalf("%s: %v", path, err)
	}
	return pod.Spec.Containers[0].Command[1:]
}

// rootPaths is args with the node's own paths, /etc/kubernetes and
// /var/lib/etcd, where the node's root holds them.
func rootPaths(root string, args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for _, p := range []string{"/etc/kubernetes", "/var/lib/etcd"} {
			if name, value, ok := strings.Cut(a, "="); ok && (value == p || strings.HasPrefix(value, p+"/")) {
				a = name + "=" + root + value
			}
		}
		out[i] = a
	}
	return out
}

// flagValues are the values of every --name=value in args.
func flagValues(args []string, name string) []string {
	var out []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
