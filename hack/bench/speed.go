package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// speed times one patch as a whole process: the plugin against kubectl patch
// of the same ConfigMap, alternating runs, and reports medians of wall time
// and peak memory (max RSS). It times `version` too (kubectl's `version --client`: it makes no API call): a command that
// does nothing but start, so what every package linked into the binary
// costs at start (its init, its pages) shows alone.
func speed(ctx context.Context, env *benchEnv, runs int) error {
	kubeconfig := env.cluster.Kubeconfig
	type sample struct {
		wall time.Duration
		rss  int64 // KiB
	}
	measure := func(name string, args ...string) (sample, error) {
		cmd := exec.CommandContext(ctx, name, args...)
		// The plugin runs as a user runs it, automatic backup included.
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "KUBEADMCFG_BACKUP_DIR="+filepath.Join(env.dir, "backups"))
		start := time.Now()
		out, err := cmd.CombinedOutput()
		wall := time.Since(start)
		if err != nil {
			return sample{}, fmt.Errorf("%s: %w: %s", name, err, out)
		}
		rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
		return sample{wall, rss}, nil
	}
	var plugin, noBackup, kubectl, version []sample
	for i := range runs {
		v, err := measure(env.plugin, "version")
		if err != nil {
			return err
		}
		p, err := measure(env.plugin, "patch", "--set", fmt.Sprintf("apiServer.extraArgs.bench=%d", i))
		if err != nil {
			return err
		}
		nb, err := measure(env.plugin, "patch", "--no-backup", "--set", fmt.Sprintf("apiServer.extraArgs.bench=nb%d", i))
		if err != nil {
			return err
		}
		k, err := measure("kubectl", "-n", "kube-system", "patch", "configmap", "kubeadm-config",
			"--type", "merge", "-p", fmt.Sprintf(`{"metadata":{"annotations":{"bench":"%d"}}}`, i))
		if err != nil {
			return err
		}
		if i > 0 { // the first run of each warms caches
			plugin, noBackup, kubectl, version = append(plugin, p), append(noBackup, nb), append(kubectl, k), append(version, v)
		}
	}
	median := func(xs []sample) sample {
		walls := make([]time.Duration, len(xs))
		rss := make([]int64, len(xs))
		for i, x := range xs {
			walls[i], rss[i] = x.wall, x.rss
		}
		slices.Sort(walls)
		slices.Sort(rss)
		return sample{walls[len(walls)/2], rss[len(rss)/2]}
	}
	k := median(kubectl)
	fmt.Printf("one patch of kube-system/kubeadm-config, whole process, median of %d alternating runs\n\n", len(plugin))
	fmt.Printf("| command | wall time | peak RSS | vs kubectl patch |\n|---|---|---|---|\n")
	row := func(name string, x sample) {
		fmt.Printf("| %s | %s | %.1f MiB | %.2fx time, %.2fx memory |\n", name, x.wall.Round(100*time.Microsecond),
			float64(x.rss)/1024, float64(x.wall)/float64(k.wall), float64(x.rss)/float64(k.rss))
	}
	row("kubectl-kubeadmcfg patch --set ... (with its automatic backup)", median(plugin))
	row("kubectl-kubeadmcfg patch --no-backup --set ...", median(noBackup))
	row("kubectl patch configmap --type merge", k)
	v := median(version)
	fmt.Printf("\nkubectl-kubeadmcfg version (no API call: start-up alone): %s, %.1f MiB peak RSS\n",
		v.wall.Round(100*time.Microsecond), float64(v.rss)/1024)
	return nil
}
