package kubeadmupgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Kubeadms is the node's kubeadm of each Kubernetes release: Template with
// {version} replaced (packaged installs keep one per release), or Default
// when Template names no version.
type Kubeadms struct {
	Template, Default string
}

// Of is the node's kubeadm of version.
func (k Kubeadms) Of(version string) string {
	if !k.PerRelease() {
		return k.Default
	}
	return strings.ReplaceAll(k.Template, "{version}", version)
}

// PerRelease reports whether the node keeps a kubeadm per release.
func (k Kubeadms) PerRelease() bool { return strings.Contains(k.Template, "{version}") }

// For is the kubeadm that renders doc on the node: with a kubeadm per
// release, that of doc's own release (a reconfiguration refuses a kubeadm
// of another minor release than kubernetesVersion) when the node has it;
// Default otherwise.
func (k Kubeadms) For(doc []byte) string {
	if !k.PerRelease() {
		return k.Default
	}
	d, err := clusterconfig.Parse(doc)
	if err != nil || d.KubernetesVersion() == "" {
		return k.Default
	}
	if bin := k.Of(d.KubernetesVersion()); executable(bin) {
		return bin
	}
	return k.Default
}

// Versions lists the releases whose kubeadm the node has: the directories
// Template's {version} matches, with an executable kubeadm in them; with
// no {version} in it, the one release Default says it is.
func (k Kubeadms) Versions(ctx context.Context) []string {
	if !k.PerRelease() {
		cmd := proc.Command(k.Default, "version", "-o", "short")
		cmd.Timeout, cmd.MaxStdout = 10*time.Second, 256
		out, err := cmd.Output(ctx)
		if v := strings.TrimSpace(out); err == nil && strings.HasPrefix(v, "v") && !strings.ContainsAny(v, " \n") {
			return []string{v}
		}
		return nil
	}
	matches, _ := filepath.Glob(strings.ReplaceAll(k.Template, "{version}", "v*"))
	prefix, suffix, _ := strings.Cut(k.Template, "{version}")
	var versions []string
	for _, m := range matches {
		v := strings.TrimSuffix(strings.TrimPrefix(m, prefix), suffix)
		if executable(m) && !strings.Contains(v, "/") {
			versions = append(versions, v)
		}
	}
	slices.Sort(versions)
	return versions
}

func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// Args are kubeadm's arguments for phase of a step of kind (Apply or
// Upgrade): every phase takes the UpgradeConfiguration (config); those
// that render manifests or the kubelet's configuration take the node's
// patches directory, when it has one; apply's preflight takes --yes, as it
// asks otherwise. kubeadm refuses a flag a phase does not know. A phase
// with sub-phases is named with them ("addon all").
func Args(kind Kind, phase, config, patches string) []string {
	args := append([]string{"upgrade", string(kind), "phase"}, strings.Fields(phase)...)
	args = append(args, "--config", config)
	switch phase {
	case ControlPlane, "kubelet-config", "addon all":
		if patches != "" {
			args = append(args, "--patches", patches)
		}
	case Preflight:
		if kind == Apply {
			args = append(args, "--yes")
		}
	}
	return args
}

// Config is the UpgradeConfiguration a node's kubeadm runs with: the
// target version, the preflight checks to ignore, and the time a
// component has to come up before kubeadm puts its manifest back. Paths go
// as arguments, never in it (Args).
func Config(version string, ignorePreflightErrors []string, upgradeManifests time.Duration) []byte {
	ignore := "[" + strings.Join(ignorePreflightErrors, ", ") + "]"
	return fmt.Appendf(nil, `apiVersion: kubeadm.k8s.io/v1beta4
kind: UpgradeConfiguration
apply:
  kubernetesVersion: %s
  ignorePreflightErrors: %s
node:
  ignorePreflightErrors: %s
timeouts:
  upgradeManifests: %s
`, version, ignore, ignore, upgradeManifests)
}

// ConfigFile is the name of the UpgradeConfiguration file in kubeadm's own
// directory of the node (TmpDir).
const ConfigFile = "kubeadmcfg-upgrade.yaml"

// TmpDir is kubeadm's own place for its files on a node whose static Pod
// manifests are in manifestsDir: /etc/kubernetes/tmp.
func TmpDir(manifestsDir string) string { return filepath.Join(filepath.Dir(manifestsDir), "tmp") }

func (n Node) tmpDir() string { return TmpDir(n.ManifestsDir) }

// args are kubeadm's arguments for phase in this step.
func (s *step) args(phase string) []string {
	return Args(s.req.Kind, phase, s.config, s.node.PatchesDir)
}

// writeConfig writes the step's UpgradeConfiguration and returns its path.
func (s *step) writeConfig() (string, error) {
	dir := s.node.tmpDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, ConfigFile)
	return path, os.WriteFile(path, Config(s.req.Version, s.node.IgnorePreflightErrors, s.req.Wait), 0o600)
}

// kubeadm runs the node's kubeadm of the target with args, bounded by
// ctx, and hands its identity to Request.Started as soon as it runs.
func (s *step) kubeadm(ctx context.Context, args ...string) error {
	bin := s.node.Kubeadms.Of(s.req.Version)
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("no kubeadm %s on this node: %w", s.req.Version, err)
	}
	if err := s.newSecond(ctx); err != nil {
		return err
	}
	cmd := proc.Command(bin, args...)
	line := strings.Join(proc.Words(cmd.Args[1:]), " ")
	start := time.Now()
	if err := s.start(ctx, cmd, "kubeadm "+line); err != nil {
		return err
	}
	s.emit(false, "Kubeadm", "kubeadm %s: done in %s", line, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// start runs cmd, handing its identity to Request.Started; a failure is
// an outputError that says how what ended, and quotes its last lines
// apart.
func (s *step) start(ctx context.Context, cmd *proc.Cmd, what string) error {
	p, err := cmd.Start(ctx)
	if err == nil {
		if s.req.Started != nil {
			s.req.Started(p.Identity())
		}
		err = p.Wait()
	}
	var re *proc.RunError
	if errors.As(err, &re) {
		return &outputError{msg: what + " " + re.How(), output: re.Tail, err: re}
	}
	return err
}

// newSecond waits, when kubeadm has made a directory in TmpDir in the
// current second, for the next one. kubeadm names the directory a phase
// makes there (its backups, kubeadm-kubelet-config-2006-01-02-15-04-05) by
// the second it runs in, and fails when it exists: a phase run again in
// the second its last run was in (upgrade-resume at once after a failure)
// would fail.
func (s *step) newSecond(ctx context.Context) error {
	for range 3 {
		now := time.Now()
		if taken, _ := filepath.Glob(filepath.Join(s.node.tmpDir(), "kubeadm-*"+now.Format(kubeadmStamp)+"*")); len(taken) == 0 {
			return nil
		}
		select {
		case <-time.After(time.Until(now.Truncate(time.Second).Add(time.Second))):
		case <-ctx.Done():
			return errInterrupted
		}
	}
	return nil
}

// kubeadmStamp is how kubeadm names its directories in TmpDir by time.
const kubeadmStamp = "2006-01-02-15-04-05"

// prune keeps the newest KeepBackups of each kind of directory kubeadm
// leaves in TmpDir on every upgrade run: a copy of the manifests, of the
// manifests it rendered, and on a stacked node of the whole etcd data
// directory (kubespray#13412); newest by modification time, since
// kubeadm names the rendered manifests' directory at random
// (os.MkdirTemp). It also keeps the newest KeepBackups of the node's etcd
// snapshots in its Store, the ones taken before each first node's
// control-plane phase among them.
func (s *step) prune() {
	keep := s.keep()
	for _, kind := range []string{"kubeadm-backup-manifests-", "kubeadm-backup-etcd-", "kubeadm-upgraded-manifests"} {
		for _, old := range oldest(filepath.Join(s.node.tmpDir(), kind+"*"), keep) {
			if err := os.RemoveAll(old); err != nil {
				s.emit(true, "Housekeeping", "cannot remove kubeadm's backup %s: %s", old, err)
				continue
			}
			s.emit(false, "Housekeeping", "removed kubeadm's backup %s (the newest %d of its kind are kept)", old, keep)
		}
	}
	if s.node.Store == nil {
		return
	}
	removed, err := s.node.Store.PruneEtcdSnapshotsOfNode(keep, s.node.Name)
	for _, name := range removed {
		s.emit(false, "Housekeeping", "removed the etcd snapshot %s (the newest %d of the node's are kept)", name, keep)
	}
	if err != nil {
		s.emit(true, "Housekeeping", "cannot prune the node's etcd snapshots: %s", exitcode.Message(err))
	}
}

// keep is how many of each kind of backup a step keeps.
func (s *step) keep() int {
	if s.node.KeepBackups <= 0 {
		return DefaultKeepBackups
	}
	return s.node.KeepBackups
}

// oldest are the paths pattern matches beyond the newest keep, by
// modification time (then name), oldest first.
func oldest(pattern string, keep int) []string {
	matches, _ := filepath.Glob(pattern)
	type entry struct {
		path string
		mod  time.Time
	}
	var entries []entry
	for _, m := range matches {
		st, err := os.Lstat(m)
		if err != nil {
			continue
		}
		entries = append(entries, entry{m, st.ModTime()})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := a.mod.Compare(b.mod); c != 0 {
			return c
		}
		return strings.Compare(a.path, b.path)
	})
	var out []string
	for _, e := range entries[:max(0, len(entries)-keep)] {
		out = append(out, e.path)
	}
	return out
}
