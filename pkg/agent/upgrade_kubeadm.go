package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// Running the node's kubeadm of a release, as an operator would on the node.

// The bounds of what a phase leaves in the record: its last lines.
const (
	phaseTailLines = 5
	phaseTailBytes = 512
)

// kubeadmOf is the node's kubeadm of version: KubeadmTemplate with
// {version} replaced, or Node.Kubeadm when the template names no version.
func (a *Agent) kubeadmOf(version string) string {
	t := a.cfg.KubeadmTemplate
	if t == "" || !strings.Contains(t, "{version}") {
		return a.cfg.Kubeadm
	}
	return strings.ReplaceAll(t, "{version}", version)
}

// nodeFor is the node as a run of doc sees it: with a KubeadmTemplate, the
// kubeadm of doc's own release renders it (reconfigure refuses a kubeadm
// of another minor release than kubernetesVersion), when the node has it.
func (a *Agent) nodeFor(doc []byte) reconfigure.Node {
	n := a.cfg.Node
	if !strings.Contains(a.cfg.KubeadmTemplate, "{version}") {
		return n
	}
	d, err := clusterconfig.Parse(doc)
	if err != nil || d.KubernetesVersion() == "" {
		return n
	}
	if bin := a.kubeadmOf(d.KubernetesVersion()); fileExists(bin) {
		n.Kubeadm = bin
	}
	return n
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// KubeadmVersions lists the releases whose kubeadm the node has: the
// directories KubeadmTemplate's {version} matches, with an executable
// kubeadm in them; with no {version} in it, the one release Node.Kubeadm
// says it is.
func (a *Agent) kubeadmVersions(ctx context.Context) []string {
	t := a.cfg.KubeadmTemplate
	if t == "" || !strings.Contains(t, "{version}") {
		out, err := boundedOutput(ctx, 10*time.Second, a.cfg.Kubeadm, "version", "-o", "short")
		if v := strings.TrimSpace(out); err == nil && strings.HasPrefix(v, "v") && !strings.ContainsAny(v, " \n") {
			return []string{v}
		}
		return nil
	}
	matches, _ := filepath.Glob(strings.ReplaceAll(t, "{version}", "v*"))
	var versions []string
	prefix, suffix, _ := strings.Cut(t, "{version}")
	for _, m := range matches {
		v := strings.TrimSuffix(strings.TrimPrefix(m, prefix), suffix)
		if st, err := os.Stat(m); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 && !strings.Contains(v, "/") {
			versions = append(versions, v)
		}
	}
	slices.Sort(versions)
	return versions
}

// kubeadm runs the node's kubeadm of version with args, bounded by ctx; it
// records the process in the run id's runner (so that a later agent of the
// node knows whether it still runs), and returns the last lines of its
// output with an error when it fails.
//
// kubeadm names the directory a phase makes in /etc/kubernetes/tmp (its
// backups, kubeadm-kubelet-config-2006-01-02-15-04-05) by the second it
// runs in, and fails when it exists: a phase run again in the second its
// last run ended in (upgrade-resume at once after a failure) first waits
// for the next second.
func (w *upgrades) kubeadm(ctx context.Context, version, id string, args ...string) (string, error) {
	a := w.a
	bin := a.kubeadmOf(version)
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no kubeadm %s on this node: %w", version, err)
	}
	line := strings.Join(words(args), " ")
	if last, ok := w.ended[line]; ok {
		select {
		case <-time.After(time.Until(last.Truncate(time.Second).Add(time.Second))):
		case <-ctx.Done():
			return "", fmt.Errorf("kubeadm was interrupted: %w", ctx.Err())
		}
	}
	defer func() {
		if w.ended == nil {
			w.ended = map[string]time.Time{}
		}
		w.ended[line] = time.Now()
	}()
	cmd := exec.CommandContext(ctx, bin, args...)
	tail := &upgradestate.Tail{}
	cmd.Stdout, cmd.Stderr = tail, tail
	supervise(cmd)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("cannot run %s: %w", bin, err)
	}
	p := upgradestate.LocalProcesses().Describe(cmd.Process.Pid)
	if _, err := w.update(context.WithoutCancel(ctx), func(rec *upgradestate.Record) (bool, error) { return rec.RecordProcess(id, p) }); err != nil {
		a.warn("UpgradeNotRecorded", "could not record kubeadm's pid %d: %s", p.PID, exitcode.Message(err))
	}
	err := cmd.Wait()
	out := tail.Last(phaseTailLines, phaseTailBytes)
	var exit *exec.ExitError
	switch {
	case err == nil:
		a.info("Kubeadm", "kubeadm %s: done in %s", line, time.Since(start).Round(100*time.Millisecond))
		return out, nil
	case ctx.Err() != nil:
		return out, fmt.Errorf("kubeadm was interrupted: %w", ctx.Err())
	case errors.As(err, &exit):
		return out, fmt.Errorf("kubeadm %s exited with %s", line, exit.ProcessState)
	}
	return out, err
}

// boundedOutput runs a short command and returns what it printed.
func boundedOutput(ctx context.Context, limit time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tail := &upgradestate.Tail{}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = tail
	err := cmd.Run()
	return tail.Last(1, 256), err
}

// tmpDir is kubeadm's own place for its files on the node:
// /etc/kubernetes/tmp, beside the manifests directory.
func (w *upgrades) tmpDir() string { return filepath.Join(filepath.Dir(w.a.cfg.ManifestsDir), "tmp") }

// writeConfig writes the UpgradeConfiguration the node's kubeadm runs
// with, in kubeadm's own directory of the node: the target version, the
// preflight checks to ignore, and the time a component has to come up
// before kubeadm puts its manifest back (the agent's --wait). Paths go as
// arguments, never in it (--patches).
func (w *upgrades) writeConfig(version string) (string, error) {
	a := w.a
	ignore := "[]"
	if len(a.cfg.IgnorePreflightErrors) > 0 {
		ignore = "[" + strings.Join(a.cfg.IgnorePreflightErrors, ", ") + "]"
	}
	doc := fmt.Sprintf(`apiVersion: kubeadm.k8s.io/v1beta4
kind: UpgradeConfiguration
apply:
  kubernetesVersion: %s
  ignorePreflightErrors: %s
node:
  ignorePreflightErrors: %s
timeouts:
  upgradeManifests: %s
`, version, ignore, ignore, a.cfg.Wait)
	if err := os.MkdirAll(w.tmpDir(), 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(w.tmpDir(), "kubeadmcfg-upgrade.yaml")
	return path, os.WriteFile(path, []byte(doc), 0o600)
}

// prune keeps the newest KeepKubeadmBackups of each kind of directory
// kubeadm leaves in dir on every upgrade run: a copy of the manifests, of
// the manifests it rendered, and on a stacked node of the whole etcd data
// directory (kubespray#13412).
func prune(a *Agent, dir string) {
	for _, kind := range []string{"kubeadm-backup-manifests-", "kubeadm-backup-etcd-", "kubeadm-upgraded-manifests"} {
		matches, _ := filepath.Glob(filepath.Join(dir, kind+"*"))
		slices.Sort(matches) // kubeadm names them by their time
		for _, old := range matches[:max(0, len(matches)-a.cfg.KeepKubeadmBackups)] {
			if err := os.RemoveAll(old); err != nil {
				a.warn("Housekeeping", "cannot remove kubeadm's backup %s: %s", old, err)
				continue
			}
			a.info("Housekeeping", "removed kubeadm's backup %s (the newest %d of its kind are kept)", old, a.cfg.KeepKubeadmBackups)
		}
	}
}

// words are a command line's arguments before its first flag.
func words(args []string) []string {
	if i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "-") }); i >= 0 {
		return args[:i]
	}
	return args
}
