package imagecheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/unitfile"
	agentcmd "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/agent"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/kubeadmupgrade"
)

// The deployment of agents that run upgrades, on top of the default: the
// unit's drop-in and the DaemonSet's patch, read as systemd and kubectl
// read them, and the kubelet's install script the drop-in runs.

const (
	dropInFile        = "../../deploy/kubeadmcfg-agent.service.d/upgrades.conf"
	upgradesPatch     = "../../deploy/agent-daemonset-upgrades.yaml"
	externalEtcdPatch = "../../deploy/agent-daemonset-external-etcd.yaml"
	kubeletInstall    = "../../deploy/kubeadmcfg-kubelet-install.sh"
)

// upgradeFlags are the agent's flags for upgrades: those whose help says
// "Upgrades:".
func upgradeFlags(t *testing.T) []string {
	t.Helper()
	cmd := agentcmd.NewCmdAgent(cmdutil.NewClusterFlags(), genericiooptions.NewTestIOStreamsDiscard())
	var names []string
	for _, name := range []string{"kubeadm-template", "kubelet-restart-command", "kubelet-config", "ignore-preflight-errors", "keep-kubeadm-backups"} {
		if f := cmd.Flags().Lookup(name); f == nil || !strings.HasPrefix(f.Usage, "Upgrades: ") {
			t.Fatalf("the agent has no flag --%s for upgrades", name)
		}
	}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if strings.HasPrefix(f.Usage, "Upgrades: ") {
			names = append(names, f.Name)
		}
	})
	return names
}

// addedFlags says how the command line got differs from base: it must be
// base, word for word, followed by upgrade flags alone ("--name value" or
// "--name=value"), none of them base's. It returns those flags' names.
func addedFlags(t *testing.T, base, got []string) (names []string, problems []string) {
	t.Helper()
	if len(got) < len(base) || !slices.Equal(base, got[:len(base)]) {
		return nil, []string{fmt.Sprintf("it does not start with the base's command line (-base +got):\n%s", cmp.Diff(base, got))}
	}
	allowed := upgradeFlags(t)
	rest := got[len(base):]
	for i := 0; i < len(rest); i++ {
		name, ok := strings.CutPrefix(rest[i], "--")
		if !ok {
			problems = append(problems, fmt.Sprintf("%q after the base's command line is no flag", rest[i]))
			continue
		}
		if n, _, joined := strings.Cut(name, "="); joined {
			name = n
		} else {
			i++ // its value
		}
		if !slices.Contains(allowed, name) {
			problems = append(problems, fmt.Sprintf("--%s after the base's command line is no flag for upgrades (%s)", name, strings.Join(allowed, ", ")))
		}
		if _, inBase := unitfile.Flag(base, name); inBase {
			problems = append(problems, fmt.Sprintf("--%s is the base's already", name))
		}
		names = append(names, name)
	}
	return names, problems
}

// upgradeStopBudget is the longest an agent told to stop during an
// upgrade may take: the first node's control-plane step, stopped before
// kubeadm-config says the target, in pkg/agent's stepRun.run, end and
// putBack: --stop-grace for the phase that runs, then kubeadm is killed and
// the node put back: a look of up to min(--wait, 1m) (its gateQuick)
// whether kubeadm put the node back itself, each component back within
// --wait and once more for the etcd lock (reconfigure.PutBack), --wait for
// the node to run its previous release healthy, and a minute for the
// record's writes and the housekeeping of kubeadm's backups.
//
// A stop in a kubelet step takes less: --stop-grace, the restart command's
// grace to stop its install (kubeadmupgrade.DefaultKubeletRestartGrace),
// and a minute for the record.
func upgradeStopBudget(t *testing.T, argv []string) time.Duration {
	t.Helper()
	wait, grace := waitAndGrace(t, argv)
	components := len(controlplane.Components()) + 1 // and a stacked etcd member
	return max(grace+min(wait, time.Minute)+time.Duration(components+1)*wait+wait+time.Minute,
		grace+kubeadmupgrade.DefaultKubeletRestartGrace+time.Minute)
}

// readDropIn reads the base unit with a drop-in.
func readDropIn(t *testing.T, dropIn string) *unitfile.Unit {
	t.Helper()
	u, err := unitfile.Read(unitFile, dropIn)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// dropInProblems lists what is wrong with the base unit and drop-in u:
// its sandbox for upgrades, its command line against the base's, and its
// stop budget.
func dropInProblems(t *testing.T, u *unitfile.Unit) []string {
	t.Helper()
	problems := unitProblems(u, upgrades)
	base, err := unitfile.Read(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	baseStart, _ := base.Value("Service", "ExecStart")
	_, baseArgv := unitfile.Command(baseStart)
	starts := u.Values("Service", "ExecStart")
	if len(starts) != 1 {
		return append(problems, fmt.Sprintf("%d ExecStart= lines (systemd refuses more than one: reset it with an empty ExecStart= first)", len(starts)))
	}
	_, argv := unitfile.Command(starts[0])
	names, wrong := addedFlags(t, baseArgv, argv)
	problems = append(problems, wrong...)
	if !slices.Contains(names, "kubelet-restart-command") || !slices.Contains(names, "kubeadm-template") {
		problems = append(problems, fmt.Sprintf("the drop-in adds %q, want --kubeadm-template and --kubelet-restart-command among them", names))
	}
	stop, _ := u.Value("Service", "TimeoutStopSec")
	got, err := systemdSpan(stop)
	if err != nil {
		t.Fatal(err)
	}
	if budget := max(stopBudget(t, argv), upgradeStopBudget(t, argv)); got < budget {
		problems = append(problems, fmt.Sprintf("TimeoutStopSec=%s, under the %s a stop during an upgrade may take", stop, budget))
	}
	return problems
}

// writablePaths are the host paths a unit makes writable, sorted.
func writablePaths(u *unitfile.Unit) []string {
	paths := slices.Clone(u.Words("Service", "ReadWritePaths"))
	slices.Sort(paths)
	return paths
}

// TestUpgradeDropIn: the base unit with the upgrades drop-in is the base's
// command line plus flags for upgrades, sandboxed for upgrades (all of
// /etc/kubernetes and /var/lib/kubelet writable, the rest of the system,
// the etcd data included, read-only, the base's capabilities), given time
// to stop during an upgrade, and writes what the DaemonSet's patch mounts
// read-write. systemd-analyze scores the same files (hack/verify.sh).
func TestUpgradeDropIn(t *testing.T) {
	u := readDropIn(t, dropInFile)
	if problems := dropInProblems(t, u); len(problems) > 0 {
		t.Errorf("%s with %s:\n%s", unitFile, dropInFile, strings.Join(problems, "\n"))
	}
	// /etc/kubernetes as a whole passes for upgrades alone.
	if problems := unitProblems(u, turns); !slices.ContainsFunc(problems, func(p string) bool {
		return strings.HasPrefix(p, "TemporaryFileSystem=, want /etc/kubernetes:ro")
	}) {
		t.Errorf("the drop-in passes as a unit for turns: %q", problems)
	}
	ds := readPatchedDaemonSet(t, upgradesPatch)
	var dsWritable []string
	_, mounts := lintDaemonSet(t, ds, upgrades)
	for _, m := range mounts {
		if !m.ReadOnly {
			dsWritable = append(dsWritable, m.Path)
		}
	}
	slices.Sort(dsWritable)
	if diff := cmp.Diff(dsWritable, writablePaths(u)); diff != "" {
		t.Errorf("the drop-in makes other paths writable than the DaemonSet's patch mounts read-write (-DaemonSet +unit):\n%s", diff)
	}

	// The kubelet's install: the script the drop-in's header installs, as
	// a unit of a fixed name (TestKubeletInstallAsAUnit runs it), with a
	// bound of its own.
	start, _ := u.Value("Service", "ExecStart")
	_, argv := unitfile.Command(start)
	words := kubeletRestartCommand(t)
	header := readFile(t, dropInFile)
	if len(words) != 3 || !strings.Contains(header, "install -m 0755 deploy/kubeadmcfg-kubelet-install.sh "+words[0]+"\n") ||
		words[1] != "--unit" || words[2] != kubeletUnit {
		t.Errorf("--kubelet-restart-command %q: want the script the header installs, with --unit %s", words, kubeletUnit)
	}
	if timeout, _ := unitfile.Flag(argv, "kubelet-restart-timeout"); timeout == "" {
		t.Errorf("no --kubelet-restart-timeout: want the install's bound said where it is seen")
	}

	// The base's stop budget is short for an upgrade.
	if base, err := unitfile.Read(unitFile); err == nil {
		stop, _ := base.Value("Service", "TimeoutStopSec")
		got, _ := systemdSpan(stop)
		if budget := upgradeStopBudget(t, argv); got >= budget {
			t.Errorf("the base's TimeoutStopSec=%s covers the %s of an upgrade: the drop-in's own would not be checked", stop, budget)
		}
	}

	// What the lint refuses: the first proposal (the etcd data writable,
	// CAP_SYS_ADMIN, the base's command line), a drop-in whose command line
	// drifted from the base's, and one that does not reset ExecStart=.
	for file, want := range map[string][]string{
		"testdata/upgrades-proposal.conf": {
			"ReadWritePaths=/var/lib/etcd; only /etc/kubernetes, /var/lib/kubelet may be",
			"CapabilityBoundingSet=CAP_CHOWN CAP_DAC_OVERRIDE CAP_FOWNER CAP_SYS_ADMIN, want at most CAP_CHOWN CAP_DAC_OVERRIDE CAP_FOWNER",
			"the drop-in adds [], want --kubeadm-template and --kubelet-restart-command among them",
			"TimeoutStopSec=12min, under the 15m0s a stop during an upgrade may take",
		},
		"testdata/upgrades-drifted.conf":  {"it does not start with the base's command line"},
		"testdata/upgrades-no-reset.conf": {"2 ExecStart= lines (systemd refuses more than one"},
	} {
		got := dropInProblems(t, readDropIn(t, file))
		for _, w := range want {
			if !slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, w) }) {
				t.Errorf("%s: the lint does not say %q:\n%s", file, w, strings.Join(got, "\n"))
			}
		}
	}
}

// TestUpgradeDaemonSet: the DaemonSet patched for upgrades mounts all of
// /etc/kubernetes and /var/lib/kubelet read-write and the etcd data
// read-only, which the lint passes for upgrades alone; its command is the
// base's plus flags for upgrades, and its grace period covers a stop
// during an upgrade; patched for an external etcd as well, it mounts no
// etcd data.
func TestUpgradeDaemonSet(t *testing.T) {
	ds := readPatchedDaemonSet(t, upgradesPatch)
	problems, mounts := lintDaemonSet(t, ds, upgrades)
	if len(problems) > 0 {
		t.Errorf("%s:\n%s", upgradesPatch, strings.Join(problems, "\n"))
	}
	want := []mount{
		{"/etc/kubernetes", false},
		{"/var/lib/kubelet", false},
		{"/var/lib/etcd", true},
		{"/var/run/containerd/containerd.sock", true},
	}
	if diff := cmp.Diff(want, mounts); diff != "" {
		t.Errorf("%s mounts (-want +got):\n%s", upgradesPatch, diff)
	}
	if problems, _ := lintDaemonSet(t, ds, turns); !slices.Contains(problems, "volume etc-kubernetes mounts /etc/kubernetes: the host's /etc/kubernetes as a whole") {
		t.Errorf("the DaemonSet for upgrades passes the lint of the default one: %q", problems)
	}
	for host, readOnly := range map[string]bool{"/etc": true, "/": true, "/srv/pki/ca.key": true, "/var/lib/etcd": false, "/var/lib": false} {
		ds := readPatchedDaemonSet(t, upgradesPatch)
		ds.Spec.Template.Spec.Volumes = append(ds.Spec.Template.Spec.Volumes,
			corev1.Volume{Name: "extra", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host}}})
		c := &ds.Spec.Template.Spec.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "extra", MountPath: host + "-extra", ReadOnly: readOnly})
		if problems, _ := lintDaemonSet(t, ds, upgrades); !slices.ContainsFunc(problems, func(p string) bool {
			return strings.HasPrefix(p, "volume extra mounts "+host+": ") || strings.HasPrefix(p, "volume extra mounts "+host+" read-write")
		}) {
			t.Errorf("a mount of %s (read-only %v) in the DaemonSet for upgrades: %q, want it refused", host, readOnly, problems)
		}
	}

	base := agentContainer(t, readDaemonSet(t, daemonSetFile)).Command
	c := agentContainer(t, ds)
	names, wrong := addedFlags(t, base, c.Command)
	if len(wrong) > 0 {
		t.Errorf("%s's command:\n%s", upgradesPatch, strings.Join(wrong, "\n"))
	}
	if !slices.Contains(names, "kubeadm-template") {
		t.Errorf("%s adds %q, want --kubeadm-template among them", upgradesPatch, names)
	}
	// The kubelet step is the gate alone: the restart command is the
	// image's own binary, doing nothing.
	if restart, _ := unitfile.Flag(c.Command, "kubelet-restart-command"); !slices.Equal(strings.Fields(restart), []string{base[0], "version"}) {
		t.Errorf("--kubelet-restart-command=%s, want %s version, which does nothing", restart, base[0])
	}
	grace := ds.Spec.Template.Spec.TerminationGracePeriodSeconds
	if budget := max(stopBudget(t, c.Command), upgradeStopBudget(t, c.Command)); grace == nil || time.Duration(*grace)*time.Second < budget {
		t.Errorf("terminationGracePeriodSeconds under the %s a stop during an upgrade may take", budget)
	}

	external := readPatchedDaemonSet(t, upgradesPatch, externalEtcdPatch)
	problems, mounts = lintDaemonSet(t, external, upgrades)
	if len(problems) > 0 {
		t.Errorf("%s then %s:\n%s", upgradesPatch, externalEtcdPatch, strings.Join(problems, "\n"))
	}
	want = []mount{{"/etc/kubernetes", false}, {"/var/lib/kubelet", false}, {"/var/run/containerd/containerd.sock", true}}
	if diff := cmp.Diff(want, mounts); diff != "" {
		t.Errorf("for upgrades with an external etcd (-want +got):\n%s", diff)
	}
	for _, m := range agentContainer(t, external).VolumeMounts {
		if m.MountPath == "/usr/local/bin/cp" {
			t.Errorf("with an external etcd the DaemonSet still mounts a cp for etcd's data")
		}
	}
}

// TestKubeletInstall runs deploy/kubeadmcfg-kubelet-install.sh as the
// drop-in's systemd-run does, on a node's root with two releases unpacked,
// and a systemctl that logs what it is asked.
func TestKubeletInstall(t *testing.T) {
	root := t.TempDir()
	bin := t.TempDir()
	for _, v := range []string{"v1.36.3", "v1.37.2"} {
		dir := filepath.Join(root, "usr", "local", "kubernetes", v, "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "kubelet"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(root, "systemctl.log")
	systemctl := func(exit int) {
		stub := fmt.Sprintf("#!/bin/sh\necho \"$@\" >>%s\nexit %d\n", log, exit)
		if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	install := func(version string, args ...string) (code int, stdout, stderr string) {
		cmd := exec.Command(kubeletInstall, append([]string{"--rootfs", root}, args...)...)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), kubeadmupgrade.KubeletVersionEnv+"="+version)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		if err != nil && cmd.ProcessState == nil {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
	}
	link := filepath.Join(root, "usr", "local", "bin", "kubelet")
	target := func() string {
		got, err := os.Readlink(link)
		if err != nil {
			return err.Error()
		}
		return got
	}
	calls := func() string {
		data, _ := os.ReadFile(log)
		_ = os.Remove(log)
		return string(data)
	}

	systemctl(0)
	for _, v := range []string{"v1.36.3", "v1.37.2"} {
		code, out, errOut := install(v)
		if want := "/usr/local/kubernetes/" + v + "/bin/kubelet"; code != 0 || target() != want || calls() != "restart kubelet\n" ||
			out != "kubeadmcfg-kubelet-install: "+link+" is "+want+", and the kubelet restarted\n" {
			t.Errorf("install %s: exit %d, link %s, stdout %q, stderr %q", v, code, target(), out, errOut)
		}
	}
	for _, tc := range []struct {
		version string
		args    []string
		code    int
		stderr  string
	}{
		{"v1.38.0", nil, 1, "no kubelet v1.38.0 at " + root + "/usr/local/kubernetes/v1.38.0/bin/kubelet"},
		{"", nil, 2, "KUBEADMCFG_KUBELET_VERSION must name a release (v1.37.2), not ''"},
		{"v1.37.2/../../x", nil, 2, "KUBEADMCFG_KUBELET_VERSION must name a release"},
		{"v1.36.3", []string{"--now"}, 2, "unknown argument --now"},
	} {
		code, _, errOut := install(tc.version, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.stderr) || target() != "/usr/local/kubernetes/v1.37.2/bin/kubelet" || calls() != "" {
			t.Errorf("install %q %q: exit %d, stderr %q, link %s; want exit %d saying %q, nothing changed", tc.version, tc.args, code, errOut, target(), tc.code, tc.stderr)
		}
	}
	systemctl(1)
	if code, _, errOut := install("v1.36.3"); code != 1 || !strings.Contains(errOut, "but systemctl restart kubelet failed") {
		t.Errorf("a failed restart: exit %d, stderr %q", code, errOut)
	}
}

// kubeletUnit is the name of the kubelet install's transient unit.
const kubeletUnit = "kubeadmcfg-kubelet-install"

// kubeletRestartCommand is the drop-in's --kubelet-restart-command, split
// as the agent splits it.
func kubeletRestartCommand(t *testing.T) []string {
	t.Helper()
	start, _ := readDropIn(t, dropInFile).Value("Service", "ExecStart")
	_, argv := unitfile.Command(start)
	restart, _ := unitfile.Flag(argv, "kubelet-restart-command")
	return strings.Fields(restart)
}

// systemdRunStub stands in for systemd-run --unit UNIT --wait: it runs the
// command as the unit, outside the caller's process group and session, as
// systemd does (a supervisor in a session of its own runs it in another,
// and records its pid, then its exit code), with an environment of
// --setenv alone, and waits for it. It refuses a unit that is loaded
// ($STUB_DIR/UNIT.state exists), and, killed, leaves the unit running, as
// the real one does.
const systemdRunStub = `#!/bin/sh
echo "systemd-run $*" >>"$STUB_DIR/log"
unit= setenv=
while [ $# -gt 0 ]; do
	case "$1" in
	--unit) unit=$2; shift 2 ;;
	--setenv=*) setenv=${1#--setenv=}; shift ;;
	--property=* | --wait | --pipe | --collect | --quiet) shift ;;
	-*) echo "systemd-run stand-in: unknown option $1" >&2; exit 1 ;;
	*) break ;;
	esac
done
case "$setenv" in *=*) ;; ?*) setenv="$setenv=$(printenv "$setenv")" ;; esac
s="$STUB_DIR/$unit"
if [ -e "$s.state" ]; then
	echo "Failed to start transient service unit: Unit $unit was already loaded or has a fragment file." >&2
	exit 1
fi
echo active >"$s.state"
rm -f "$s.exit"
setsid env -i PATH="$PATH" STUB_DIR="$STUB_DIR" $setenv sh -c 'setsid "$@" & echo $! >"$0.pid"; wait $!; c=$?; rm -f "$0.state"; echo $c >"$0.exit"' "$s" "$@" &
while [ ! -e "$s.exit" ]; do sleep 0.1; done
exit "$(cat "$s.exit")"
`

// systemctlStub stands in for systemctl: is-active and stop of the units
// systemdRunStub runs (stop ends the unit's process group and waits for
// it, as systemd ends its cgroup), and restart kubelet, which takes a
// minute while $STUB_DIR/slow-restart exists.
const systemctlStub = `#!/bin/sh
echo "systemctl $*" >>"$STUB_DIR/log"
s="$STUB_DIR/$2"
case "$1" in
is-active)
	if [ -e "$s.state" ]; then cat "$s.state"; exit 0; fi
	echo inactive
	exit 3 ;;
stop)
	[ -e "$s.state" ] || { echo "Failed to stop $2: Unit $2 not loaded." >&2; exit 5; }
	kill -TERM "-$(cat "$s.pid")"
	i=0
	while [ -e "$s.state" ]; do
		i=$((i + 1))
		[ $i -le 100 ] || { echo "systemctl stand-in: $2 did not stop" >&2; exit 1; }
		sleep 0.1
	done ;;
restart)
	if [ -e "$STUB_DIR/slow-restart" ]; then sleep 60; fi ;;
esac
`

// TestKubeletInstallAsAUnit runs the drop-in's --kubelet-restart-command
// as the agent runs it (internal/proc, in a process group of its own,
// SIGTERM first when given up on, with the agent's grace), with stand-ins
// of systemd-run and systemctl: the install runs as the unit
// kubeadmcfg-kubelet-install.service, waited for; a second one is refused
// while the first runs, and starts nothing; the agent's stop makes the
// script stop the unit before it exits, so that no install goes on
// unsupervised, and the next one starts.
func TestKubeletInstallAsAUnit(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("the systemd-run stand-in needs setsid")
	}
	root, bin, dir := t.TempDir(), t.TempDir(), t.TempDir()
	for _, v := range []string{"v1.36.3", "v1.37.2"} {
		d := filepath.Join(root, "usr", "local", "kubernetes", v, "bin")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "kubelet"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, stub := range map[string]string{"systemd-run": systemdRunStub, "systemctl": systemctlStub} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script, err := filepath.Abs(kubeletInstall)
	if err != nil {
		t.Fatal(err)
	}
	words := kubeletRestartCommand(t)
	if len(words) == 0 {
		t.Fatal("the drop-in has no --kubelet-restart-command")
	}
	args := append([]string{script}, words[1:]...) // the script the header installs as words[0]
	args = append(args, "--rootfs", root)
	start := func(ctx context.Context, version string) (*proc.Process, error) {
		c := proc.Command(args[0], args[1:]...)
		c.Environ = []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "STUB_DIR=" + dir}
		c.Env = []string{kubeadmupgrade.KubeletVersionEnv + "=" + version}
		c.Grace = kubeadmupgrade.DefaultKubeletRestartGrace
		return c.Start(ctx)
	}
	run := func(version string) error {
		p, err := start(context.Background(), version)
		if err != nil {
			return err
		}
		return p.Wait()
	}
	log := func() string {
		data, _ := os.ReadFile(filepath.Join(dir, "log"))
		return string(data)
	}
	link := filepath.Join(root, "usr", "local", "bin", "kubelet")
	unit := kubeletUnit + ".service"
	state := filepath.Join(dir, unit+".state")

	if err := run("v1.36.3"); err != nil {
		t.Fatalf("an install as a unit: %v", err)
	}
	if got, _ := os.Readlink(link); got != "/usr/local/kubernetes/v1.36.3/bin/kubelet" {
		t.Errorf("the link is %q after the install of v1.36.3", got)
	}
	if l := log(); !strings.Contains(l, "systemd-run --unit "+unit+" --wait ") || !strings.Contains(l, "systemctl restart kubelet\n") {
		t.Errorf("the install did not run as %s, waited for, and restart the kubelet:\n%s", unit, l)
	}

	// An install that takes long, and a second one meanwhile.
	if err := os.WriteFile(filepath.Join(dir, "slow-restart"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	first, err := start(ctx, "v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); strings.Count(log(), "systemctl restart kubelet\n") < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the second install does not restart the kubelet:\n%s", log())
		}
	}
	err = run("v1.37.2")
	var re *proc.RunError
	if !errors.As(err, &re) || re.ExitCode != 1 ||
		!strings.Contains(re.Tail, "an install started earlier still runs as "+unit+" (active)") {
		t.Errorf("an install while one runs: %v, want exit 1 saying that one runs", err)
	}
	if n := strings.Count(log(), "systemd-run "); n != 2 {
		t.Errorf("%d installs were started, want 2: a second one started while one ran:\n%s", n, log())
	}

	// The agent gives up on the first: the script stops its unit.
	stop()
	err = first.Wait()
	if !errors.As(err, &re) || !re.Interrupted || !strings.Contains(re.Tail, "told to stop: "+unit+" is stopped") {
		t.Errorf("the install given up on: %v, want interrupted, saying the unit is stopped", err)
	}
	if !strings.Contains(log(), "systemctl stop "+unit+"\n") {
		t.Errorf("the script did not stop %s:\n%s", unit, log())
	}
	if _, err := os.Stat(state); err == nil {
		t.Errorf("%s still runs after the agent gave up on it", unit)
	}

	// Nothing runs now: the next install starts.
	if err := os.Remove(filepath.Join(dir, "slow-restart")); err != nil {
		t.Fatal(err)
	}
	if err := run("v1.37.2"); err != nil {
		t.Fatalf("an install after the one stopped: %v", err)
	}
	if got, _ := os.Readlink(link); got != "/usr/local/kubernetes/v1.37.2/bin/kubelet" {
		t.Errorf("the link is %q after the install of v1.37.2", got)
	}
}

// readFile reads a file of the repository.
func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
