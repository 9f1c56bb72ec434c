// Command bench measures the plugin against its baselines on a real local
// control plane (etcd and kube-apiserver built by hack/testbin.sh, seeded by
// the real kubeadm) and prints tables. It is not a test: it asserts nothing.
//
//	go run ./hack/bench speed        # one patch: plugin process vs kubectl patch
//	go run ./hack/bench contention   # W concurrent writers: plugin vs baselines
//	go run ./hack/bench rollout      # a rollout over 3 nodes: hand-offs, vs reconfigure, an idle agent
//	go run ./hack/bench upgrade      # an upgrade of 3 nodes by their agents: steps, hand-offs, vs kubeadm's runs
//
// rollout and upgrade run in namespaces of their own, on the 3-node local
// control plane of hack/localcluster (testcluster.StartLocal): see
// rollout.go and upgrade.go.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench speed|contention|rollout|upgrade [flags]")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	runs := fs.Int("runs", 21, "speed: runs of each command (alternating)")
	patches := fs.Int("k", 10, "contention: patches per writer")
	writersFlag := fs.String("w", "1,8,32", "contention: writer counts")
	formsFlag := fs.String("forms", "", "contention: comma-separated form numbers to run (1 plugin processes, 2 engine, 3 naive, 4 DefaultRetry); empty runs all")
	fsync := fs.Bool("fsync", true, "run etcd with fsync, as a real cluster does")
	rounds := fs.Int("rounds", 3, "rollout: rounds of one rollout and three reconfigure runs (alternating)")
	idle := fs.Duration("idle", time.Minute, "rollout: how long the idle agents are watched")
	_ = fs.Parse(os.Args[2:])

	switch mode {
	case "rollout":
		os.Exit(rolloutMain(rolloutOptions{Rounds: *rounds, Idle: *idle}))
	case "upgrade":
		os.Exit(upgradeMain())
	}
	if err := run(mode, *fsync, *runs, *writersFlag, *formsFlag, *patches); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(mode string, fsync bool, runs int, writers, forms string, patches int) error {
	ctx := context.Background()
	env, err := setup(ctx, fsync)
	if err != nil {
		return err
	}
	defer env.cluster.Stop()
	defer os.RemoveAll(env.dir)
	switch mode {
	case "speed":
		return speed(ctx, env, runs)
	case "contention":
		return contention(ctx, env, writers, forms, patches)
	}
	return fmt.Errorf("unknown mode %q", mode)
}

type benchEnv struct {
	cluster *testcluster.Cluster
	plugin  string // path of the built plugin
	dir     string
}

func setup(ctx context.Context, fsync bool) (*benchEnv, error) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kubeadmcfg-bench-")
	if err != nil {
		return nil, err
	}
	plugin, err := buildPlugin(root, dir)
	if err != nil {
		return nil, err
	}
	bins, err := testcluster.FindBinaries()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, err := testcluster.Start(ctx, bins, testcluster.Options{Fsync: fsync})
	if err != nil {
		return nil, err
	}
	if _, err := c.SeedKubeadm(ctx, ""); err != nil {
		c.Stop()
		return nil, err
	}
	return &benchEnv{cluster: c, plugin: plugin, dir: dir}, nil
}

// buildPlugin builds the plugin as a release does (static, stripped,
// trimmed: the Makefile's build target) into dir, and returns its path.
func buildPlugin(root, dir string) (string, error) {
	plugin := filepath.Join(dir, "kubectl-kubeadmcfg")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", plugin, "./cmd/kubectl-kubeadmcfg")
	build.Dir, build.Stderr = root, os.Stderr
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build the plugin: %w", err)
	}
	return plugin, nil
}
