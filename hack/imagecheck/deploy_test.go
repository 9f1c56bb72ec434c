package imagecheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/unitfile"
	nodeagent "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/agent"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
)

// The agent's deployment files, read as the cluster and systemd read them:
// what of the host they expose to the agent, and how long they let it take
// to stop. internal/e2e's TestAgentAsDocumented runs them, and
// TestUpgradeByAgents runs one node's agent as the unit with the upgrades
// drop-in.

const (
	daemonSetFile = "../../deploy/agent-daemonset.yaml"
	unitFile      = "../../deploy/kubeadmcfg-agent.service"
)

// secrets are the files of a kubeadm control-plane node that no agent
// needs and none may see: kubeconfigs of system:masters and of the
// components, the CA keys and the service-account signing key.
var secrets = []string{
	"/etc/kubernetes/admin.conf",
	"/etc/kubernetes/super-admin.conf",
	"/etc/kubernetes/controller-manager.conf",
	"/etc/kubernetes/scheduler.conf",
	"/etc/kubernetes/kubelet.conf",
	"/etc/kubernetes/pki/ca.key",
	"/etc/kubernetes/pki/front-proxy-ca.key",
	"/etc/kubernetes/pki/etcd/ca.key",
	"/etc/kubernetes/pki/sa.key",
}

// variant is a deployment of the agent and what it may have of the host.
type variant struct {
	name string
	// whole says that /etc/kubernetes as a whole, with its secrets, may be
	// given to the agent.
	whole bool
	// readWrite are the host paths that may be writable besides those the
	// agent's flags name (the manifests, the backups).
	readWrite []string
}

var (
	// turns is the default deployment: what a configuration turn needs.
	turns = variant{name: "turns"}
	// upgrades is the deployment of agents that run kubeadm upgrade: the
	// unit with deploy/kubeadmcfg-agent.service.d/upgrades.conf, the
	// DaemonSet patched with deploy/agent-daemonset-upgrades.yaml.
	upgrades = variant{name: "upgrades", whole: true, readWrite: []string{"/etc/kubernetes", "/var/lib/kubelet"}}
)

// exposes says why the host path p may not be given to the agent of
// variant v, or "": /etc/kubernetes as a whole (or a directory above it), a
// secret, a directory holding one, or any CA key; for upgrades,
// /etc/kubernetes and what it holds may be, but nothing above it, nor a CA
// key elsewhere.
func (v variant) exposes(p string) string {
	p = path.Clean(p)
	const etc = "/etc/kubernetes/"
	above := strings.TrimSuffix(p, "/") + "/"
	switch {
	case v.whole && (p == "/etc/kubernetes" || strings.HasPrefix(p, etc)):
		return ""
	case v.whole && strings.HasPrefix(etc, above):
		return "more of the host than /etc/kubernetes"
	case p == "/etc/kubernetes" || strings.HasPrefix(etc, above):
		return "the host's /etc/kubernetes as a whole"
	case strings.HasSuffix(p, "ca.key"):
		return "a CA key"
	}
	for _, s := range secrets {
		if s == p || strings.HasPrefix(s, p+"/") {
			return s
		}
	}
	return ""
}

// mount is a path of the host the agent sees, where it sees it.
type mount struct {
	Path     string
	ReadOnly bool
}

// readDaemonSet reads the agent's DaemonSet.
func readDaemonSet(t *testing.T, file string) *appsv1.DaemonSet {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
		var ds appsv1.DaemonSet
		if err := yaml.UnmarshalStrict([]byte(doc), &ds); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if ds.Kind == "DaemonSet" {
			return &ds
		}
	}
	t.Fatalf("%s holds no DaemonSet", file)
	return nil
}

// agentContainer is the DaemonSet's agent container.
func agentContainer(t *testing.T, ds *appsv1.DaemonSet) corev1.Container {
	t.Helper()
	c := ds.Spec.Template.Spec.Containers
	i := slices.IndexFunc(c, func(c corev1.Container) bool { return c.Name == "agent" })
	if i < 0 {
		t.Fatal("no agent container")
	}
	return c[i]
}

// readPatchedDaemonSet reads the agent's DaemonSet with the strategic merge
// patches applied in order, as `kubectl patch --local --patch-file` applies
// them (docs/agent.md gives those commands; internal/e2e runs them).
func readPatchedDaemonSet(t *testing.T, patches ...string) *appsv1.DaemonSet {
	t.Helper()
	doc, err := json.Marshal(readDaemonSet(t, daemonSetFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range patches {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := yaml.YAMLToJSON(data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if doc, err = strategicpatch.StrategicMergePatch(doc, patch, appsv1.DaemonSet{}); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	var ds appsv1.DaemonSet
	if err := json.Unmarshal(doc, &ds); err != nil {
		t.Fatal(err)
	}
	return &ds
}

// lintDaemonSet lists what is wrong with the host paths the DaemonSet's
// agent container mounts, for variant v: anything v.exposes refuses, a host
// path mounted elsewhere in the container than on the host (the agent's
// flags name host paths), and a read-write mount of anything but the
// manifests and the backups the agent's flags name, and v's own. It
// returns the host paths under /etc/kubernetes and /var it mounts.
func lintDaemonSet(t *testing.T, ds *appsv1.DaemonSet, v variant) (problems []string, mounts []mount) {
	t.Helper()
	c := agentContainer(t, ds)
	rw := slices.Clone(v.readWrite)
	for _, flag := range []string{"manifests-dir", "backup-dir"} {
		if v, ok := unitfile.Flag(c.Command, flag); ok {
			rw = append(rw, v)
		}
	}
	hostPaths := map[string]string{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	for _, m := range c.VolumeMounts {
		host, ok := hostPaths[m.Name]
		if !ok {
			continue
		}
		if why := v.exposes(host); why != "" {
			problems = append(problems, fmt.Sprintf("volume %s mounts %s: %s", m.Name, host, why))
		}
		if m.MountPath != host && !strings.HasPrefix(host, "/usr/") {
			problems = append(problems, fmt.Sprintf("volume %s mounts %s at %s, not where the host has it", m.Name, host, m.MountPath))
		}
		if !m.ReadOnly && !slices.Contains(rw, host) {
			problems = append(problems, fmt.Sprintf("volume %s mounts %s read-write; only %s may be", m.Name, host, strings.Join(rw, ", ")))
		}
		if host == "/etc/kubernetes" || strings.HasPrefix(host, "/etc/kubernetes/") || strings.HasPrefix(host, "/var/") {
			mounts = append(mounts, mount{Path: host, ReadOnly: m.ReadOnly})
		}
	}
	return problems, mounts
}

func TestDaemonSetMountsOnlyWhatTheAgentNeeds(t *testing.T) {
	problems, mounts := lintDaemonSet(t, readDaemonSet(t, daemonSetFile), turns)
	if len(problems) > 0 {
		t.Errorf("%s:\n%s", daemonSetFile, strings.Join(problems, "\n"))
	}
	want := []mount{
		{"/etc/kubernetes/manifests", false},
		{"/etc/kubernetes/kubeadmcfg/backups", false},
		{"/etc/kubernetes/patches", true},
		{"/etc/kubernetes/pki/etcd/ca.crt", true},
		{"/etc/kubernetes/pki/etcd/healthcheck-client.crt", true},
		{"/etc/kubernetes/pki/etcd/healthcheck-client.key", true},
	}
	if diff := cmp.Diff(want, mounts); diff != "" {
		t.Errorf("%s mounts of /etc/kubernetes (-want +got):\n%s", daemonSetFile, diff)
	}

	// The lint refuses what the DaemonSet of 66a16a5 mounted, and each
	// secret on its own.
	old, _ := lintDaemonSet(t, readDaemonSet(t, "testdata/agent-daemonset-whole-etc-kubernetes.yaml"), turns)
	if !slices.Contains(old, "volume kubernetes mounts /etc/kubernetes: the host's /etc/kubernetes as a whole") {
		t.Errorf("the lint passes a DaemonSet that mounts all of /etc/kubernetes: %q", old)
	}
	for _, host := range []string{"/etc/kubernetes/", "/etc", "/", "/etc/kubernetes/admin.conf", "/etc/kubernetes/super-admin.conf",
		"/etc/kubernetes/pki", "/etc/kubernetes/pki/etcd", "/etc/kubernetes/pki/etcd/ca.key", "/etc/kubernetes/pki/front-proxy-ca.key",
		"/srv/pki/ca.key"} {
		ds := readDaemonSet(t, daemonSetFile)
		ds.Spec.Template.Spec.Volumes = append(ds.Spec.Template.Spec.Volumes,
			corev1.Volume{Name: "extra", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host}}})
		c := &ds.Spec.Template.Spec.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "extra", MountPath: host, ReadOnly: true})
		if problems, _ := lintDaemonSet(t, ds, turns); len(problems) != 1 || !strings.HasPrefix(problems[0], "volume extra mounts "+host+": ") {
			t.Errorf("a read-only mount of %s: %q, want it refused", host, problems)
		}
	}
}

// unitPaths are the paths of /etc/kubernetes the unit binds into the
// agent's sandbox, without the "-" of an optional one, and without its
// kubeconfig (the DaemonSet's agents use their Pod's token).
func unitPaths(t *testing.T, u *unitfile.Unit) []mount {
	t.Helper()
	var out []mount
	for key, ro := range map[string]bool{"BindPaths": false, "BindReadOnlyPaths": true} {
		for _, p := range u.Words("Service", key) {
			p = strings.TrimPrefix(p, "-")
			if strings.HasSuffix(p, "/kubeadmcfg-agent.conf") {
				continue
			}
			out = append(out, mount{Path: p, ReadOnly: ro})
		}
	}
	slices.SortFunc(out, func(a, b mount) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// TestUnitIsHardened: the unit's [Service] sandboxes the agent, which
// systemd-analyze security scores too (hack/verify.sh): nothing of
// /etc/kubernetes but what a turn needs (the same paths as the DaemonSet),
// the rest of the system read-only, no new privileges, the DaemonSet's
// capabilities and no more, a /tmp of its own.
func TestUnitIsHardened(t *testing.T) {
	u, err := unitfile.Read(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	if problems := unitProblems(u, turns); len(problems) > 0 {
		t.Errorf("%s:\n%s", unitFile, strings.Join(problems, "\n"))
	}
	_, mounts := lintDaemonSet(t, readDaemonSet(t, daemonSetFile), turns)
	slices.SortFunc(mounts, func(a, b mount) int { return strings.Compare(a.Path, b.Path) })
	if diff := cmp.Diff(mounts, unitPaths(t, u)); diff != "" {
		t.Errorf("the unit binds other paths than the DaemonSet mounts (-DaemonSet +unit):\n%s", diff)
	}
	old, err := unitfile.Read("testdata/agent-unit-unhardened-short-stop.service")
	if err != nil {
		t.Fatal(err)
	}
	if problems := unitProblems(old, turns); len(problems) < 5 {
		t.Errorf("the unit of 66a16a5, which has no sandbox at all, passes: %q", problems)
	}
}

// unitProblems lists what the unit's [Service] lacks for variant v: the
// rest of the system read-only, no home directories, a /tmp of its own, no
// new privileges, the DaemonSet's capabilities and no more, and for turns
// an empty /etc/kubernetes with the paths a turn needs bound into it, for
// upgrades nothing writable but v's paths.
func unitProblems(u *unitfile.Unit, v variant) []string {
	var problems []string
	want := func(key, value string) {
		if got, _ := u.Value("Service", key); got != value {
			problems = append(problems, fmt.Sprintf("%s=%s, want %s", key, got, value))
		}
	}
	want("ProtectSystem", "strict")
	want("ProtectHome", "yes")
	want("PrivateTmp", "yes")
	want("NoNewPrivileges", "yes")
	if !v.whole {
		want("TemporaryFileSystem", "/etc/kubernetes:ro")
	}
	caps := u.Words("Service", "CapabilityBoundingSet")
	allowed := []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER"}
	if len(caps) == 0 || slices.ContainsFunc(caps, func(c string) bool { return !slices.Contains(allowed, c) }) {
		problems = append(problems, fmt.Sprintf("CapabilityBoundingSet=%s, want at most %s", strings.Join(caps, " "), strings.Join(allowed, " ")))
	}
	binds := u.Words("Service", "BindPaths")
	for _, p := range u.Words("Service", "ReadWritePaths") {
		if !v.whole && !slices.Contains(binds, p) {
			problems = append(problems, fmt.Sprintf("ReadWritePaths=%s is not bound into the sandbox read-write (BindPaths=)", p))
		}
		if v.whole && !slices.Contains(v.readWrite, p) {
			problems = append(problems, fmt.Sprintf("ReadWritePaths=%s; only %s may be", p, strings.Join(v.readWrite, ", ")))
		}
	}
	for _, key := range []string{"BindPaths", "BindReadOnlyPaths", "ReadWritePaths", "ReadOnlyPaths"} {
		for _, p := range u.Words("Service", key) {
			if why := v.exposes(strings.TrimPrefix(p, "-")); why != "" {
				problems = append(problems, fmt.Sprintf("%s=%s: %s", key, p, why))
			}
		}
	}
	return problems
}

// stopBudget is the longest an agent told to stop may take: --stop-grace
// for the turn in progress, then up to --wait for each of a stacked node's
// components to come back (etcd last) and once more for the etcd lock that
// putting etcd back takes, and a minute for the writes of the outcome.
func stopBudget(t *testing.T, argv []string) time.Duration {
	t.Helper()
	wait, grace := waitAndGrace(t, argv)
	components := len(controlplane.Components()) + 1 // and a stacked etcd member
	return grace + time.Duration(components+1)*wait + time.Minute
}

// waitAndGrace are the --wait and --stop-grace of the agent's command
// line argv, or their defaults.
func waitAndGrace(t *testing.T, argv []string) (wait, grace time.Duration) {
	t.Helper()
	duration := func(flag string, def time.Duration) time.Duration {
		v, ok := unitfile.Flag(argv, flag)
		if !ok {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("--%s=%s: %v", flag, v, err)
		}
		return d
	}
	return duration("wait", cmdutil.NewReconfigureFlags().Wait), duration("stop-grace", nodeagent.DefaultStopGrace)
}

// systemdSpan reads a systemd time span as units use it ("12min", "90s",
// "1min 30s", a bare number of seconds).
func systemdSpan(s string) (time.Duration, error) {
	units := map[string]time.Duration{"": time.Second, "s": time.Second, "sec": time.Second, "m": time.Minute,
		"min": time.Minute, "h": time.Hour, "hr": time.Hour, "ms": time.Millisecond}
	var total time.Duration
	for _, f := range strings.Fields(s) {
		i := strings.IndexFunc(f, func(r rune) bool { return r < '0' || r > '9' })
		if i < 0 {
			i = len(f)
		}
		n, err := strconv.Atoi(f[:i])
		unit, ok := units[f[i:]]
		if err != nil || !ok {
			return 0, fmt.Errorf("not a time span systemd reads here: %q", s)
		}
		total += time.Duration(n) * unit
	}
	return total, nil
}

// TestStopBudgets: systemd and the kubelet give a stopping agent at least
// stopBudget of the flags each file passes before they kill it.
func TestStopBudgets(t *testing.T) {
	check := func(unit, daemonSet string) []string {
		var short []string
		u, err := unitfile.Read(unit)
		if err != nil {
			t.Fatal(err)
		}
		start, _ := u.Value("Service", "ExecStart")
		_, argv := unitfile.Command(start)
		stop, _ := u.Value("Service", "TimeoutStopSec")
		got, err := systemdSpan(stop)
		if err != nil {
			t.Fatal(err)
		}
		if budget := stopBudget(t, argv); got < budget {
			short = append(short, fmt.Sprintf("%s: TimeoutStopSec=%s, under the %s a stop may take", unit, stop, budget))
		}
		ds := readDaemonSet(t, daemonSet)
		grace := ds.Spec.Template.Spec.TerminationGracePeriodSeconds
		if budget := stopBudget(t, agentContainer(t, ds).Command); grace == nil || time.Duration(*grace)*time.Second < budget {
			short = append(short, fmt.Sprintf("%s: terminationGracePeriodSeconds under the %s a stop may take", daemonSet, budget))
		}
		return short
	}
	if short := check(unitFile, daemonSetFile); len(short) > 0 {
		t.Error(strings.Join(short, "\n"))
	}
	if short := check("testdata/agent-unit-unhardened-short-stop.service", "testdata/agent-daemonset-whole-etc-kubernetes.yaml"); len(short) != 2 {
		t.Errorf("the 8 minutes of 66a16a5 pass: %q", short)
	}
	if d, err := systemdSpan("1min 30s"); err != nil || d != 90*time.Second {
		t.Errorf("systemdSpan(1min 30s) = %s, %v", d, err)
	}
}
