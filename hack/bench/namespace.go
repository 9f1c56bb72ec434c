package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// The rollout and upgrade benches run, as hack/localcluster run does, as the first
// process of new user, network, PID and mount namespaces: the local control
// plane needs node addresses, which exist only there, every connection the
// bench makes stays inside, and whatever it started dies with it. Outside,
// it builds what it needs while the network is there and starts itself
// again in the namespaces.

// innerEnv carries the settings to the process in the namespaces, and tells
// it that it is that process.
const innerEnv = "KUBEADMCFG_BENCH_INNER"

// namespacedMain runs bench, named name, in namespaces of its own, and
// returns the exit code: outside them it builds the plugin, finds the
// control-plane binaries, and starts itself again in them, where it runs
// bench.
func namespacedMain(name string, bench func(ctx context.Context, in inner) error) int {
	in, err := innerSpec()
	if err == nil && in == nil {
		var code int
		code, err = outside(name)
		if err == nil {
			return code
		}
	}
	if err == nil {
		if err = mountProc(); err == nil {
			err = bench(context.Background(), *in)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}

// outside builds the plugin and finds the control-plane binaries, then
// runs the bench in its namespaces. It keeps the bench's directory when
// the bench fails.
func outside(name string) (int, error) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "kubeadmcfg-bench-"+name+"-")
	if err != nil {
		return 0, err
	}
	plugin, err := buildPlugin(root, dir)
	if err != nil {
		return 0, err
	}
	bins, err := testcluster.FindBinaries()
	if err != nil {
		return 0, err
	}
	code, err := startInNamespaces(inner{Bins: bins, Plugin: plugin, Dir: dir})
	if err != nil || code != 0 {
		fmt.Fprintf(os.Stderr, "the cluster's and the agents' logs are in %s\n", dir)
		return code, err
	}
	return 0, os.RemoveAll(dir)
}

// inner is what the process in the namespaces needs besides its flags.
type inner struct {
	Bins   testcluster.Binaries
	Plugin string // the plugin, built as released
	Dir    string // the bench's directory (the cluster's, the agents' logs)
}

// innerSpec is the spec of the process in the namespaces, when this is it.
func innerSpec() (*inner, error) {
	spec := os.Getenv(innerEnv)
	if spec == "" {
		return nil, nil
	}
	var in inner
	if err := json.Unmarshal([]byte(spec), &in); err != nil {
		return nil, fmt.Errorf("%s: %w", innerEnv, err)
	}
	return &in, nil
}

// startInNamespaces runs this program again, with the same arguments, as
// the first process of new namespaces, and returns its exit code.
func startInNamespaces(in inner) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	spec, err := json.Marshal(in)
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), innerEnv+"="+string(spec), testcluster.NetnsEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("cannot create the bench's namespaces (are unprivileged user namespaces allowed?): %w", err)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}

// mountProc gives the namespaces a /proc of their own PID namespace, where
// the agents' /proc/PID are found by the PIDs the bench knows them by.
func mountProc() error {
	if os.Getpid() != 1 {
		return errors.New("the bench in its namespaces must be their first process")
	}
	if err := syscall.Mount("none", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the namespace's mounts private: %w", err)
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount the namespace's /proc: %w", err)
	}
	return nil
}
