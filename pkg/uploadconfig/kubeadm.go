package uploadconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
)

// DefaultTimeout bounds a run of kubeadm when Kubeadm.Timeout is zero. The
// dry run takes a tenth of a second on a healthy control plane; kubeadm
// retries its API calls for up to a minute (timeouts.kubernetesAPICall)
// while the API server it reaches restarts.
const DefaultTimeout = 2 * time.Minute

// MaxOutputBytes bounds what a run of kubeadm may print: besides
// kubeadm-config and its configuration, the dry run prints every object it
// reads (kubelet-config, kube-proxy, this Node, the kube-apiserver Pods),
// each at most a ConfigMap's 1 MiB.
const MaxOutputBytes = 8 << 20

// dryRunDirEnv is where kubeadm's upgrade dry run keeps the files it would
// write (constants.EnvVarUpgradeDryRunDir); without it, it makes a
// directory under /etc/kubernetes/tmp and leaves it there.
const dryRunDirEnv = "KUBEADM_UPGRADE_DRYRUN_DIR"

// Kubeadm asks this node's kubeadm of the target release what its `upgrade
// apply` phase upload-config kubeadm would write: it runs that phase with
// the UpgradeConfiguration the other phases run with, plus apply.dryRun and
// apply.printConfig, so that kubeadm prints the kubeadm-config it read and
// the ClusterConfiguration it would write, and writes nothing.
type Kubeadm struct {
	// Path is the kubeadm binary of the target release (the agent's
	// --kubeadm-template with {version} replaced).
	Path string
	// Config is the path of the UpgradeConfiguration the upgrade's apply
	// phases run with; its first document, the UpgradeConfiguration (the
	// only kind kubeadm takes in an upgrade's --config), must set
	// apply.kubernetesVersion. The dry run's copy is written in a directory
	// of its own beside it, and removed.
	Config string
	// Args are more arguments for kubeadm, such as --kubeconfig.
	Args []string
	// Env is kubeadm's environment (this process's when nil).
	Env []string
	// Timeout bounds the run (DefaultTimeout when zero).
	Timeout time.Duration
}

// Upload runs kubeadm's dry run and returns what it says. kubeadm reads
// kubeadm-config when it starts, as its phase does.
func (k Kubeadm) Upload(ctx context.Context) (*Upload, error) {
	if k.Path == "" || k.Config == "" {
		return nil, errors.New("kubeadm's dry run needs the kubeadm binary and the UpgradeConfiguration")
	}
	config, version, err := dryRunConfig(k.Config)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(filepath.Dir(k.Config), "kubeadmcfg-upload-config-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "upgrade-configuration.yaml")
	if err := os.WriteFile(path, config, 0o600); err != nil {
		return nil, err
	}
	args := append([]string{"upgrade", "apply", "phase", "upload-config", "kubeadm", "--config", path, "--dry-run"}, k.Args...)
	cmd := proc.Command(k.Path, args...)
	cmd.Environ, cmd.Env = k.Env, []string{dryRunDirEnv + "=" + dir}
	cmd.Timeout, cmd.MaxStdout = k.Timeout, MaxOutputBytes
	if cmd.Timeout <= 0 {
		cmd.Timeout = DefaultTimeout
	}
	// The tails of each output, for the lines a failure quotes.
	stdoutTail, stderrTail := &proc.Tail{}, &proc.Tail{}
	cmd.Stdout, cmd.Stderr = stdoutTail, stderrTail
	stdout, err := cmd.Output(ctx)
	if err != nil {
		return nil, kubeadmError(args, err, stderrTail, stdoutTail)
	}
	up, err := parseDryRun(stdout)
	if err != nil {
		return nil, err
	}
	if err := up.checkVersion(version); err != nil {
		return nil, err
	}
	return up, nil
}

// dryRunConfig reads the UpgradeConfiguration at path and returns it with
// apply.dryRun and apply.printConfig set, and its target version.
func dryRunConfig(path string) ([]byte, string, error) {
	data, err := input.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("read the UpgradeConfiguration: %w", err)
	}
	js, err := input.YAMLToJSON(data)
	if err != nil {
		return nil, "", fmt.Errorf("the UpgradeConfiguration %s: %w", path, err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(js, &cfg); err != nil || cfg == nil {
		return nil, "", fmt.Errorf("the UpgradeConfiguration %s is not a YAML mapping", path)
	}
	if kind, _ := cfg["kind"].(string); kind != "UpgradeConfiguration" {
		return nil, "", fmt.Errorf("%s holds a %q, not an UpgradeConfiguration", path, kind)
	}
	apply, _ := cfg["apply"].(map[string]any)
	version, _ := apply["kubernetesVersion"].(string)
	if version == "" {
		return nil, "", fmt.Errorf("the UpgradeConfiguration %s sets no apply.kubernetesVersion, the version kubeadm writes into kubeadm-config", path)
	}
	apply["dryRun"] = true
	apply["printConfig"] = true
	js, err = json.Marshal(cfg)
	if err != nil {
		return nil, "", err
	}
	out, err := yaml.JSONToYAML(js)
	return out, version, err
}

// checkVersion makes sure that kubeadm would write the target version. It
// prints the configuration with the version it resolved, and uploads a CI
// label (ci/latest) as the label: such a target is refused.
func (u *Upload) checkVersion(version string) error {
	var doc struct {
		KubernetesVersion string `json:"kubernetesVersion"`
	}
	if err := input.Unmarshal(u.Written, &doc); err != nil {
		return outputErrorf("the ClusterConfiguration kubeadm would write is not YAML: %v", err)
	}
	if doc.KubernetesVersion != version {
		return outputErrorf("kubeadm printed kubernetesVersion %q, not the target %q (a CI label is uploaded as the label, not as the version printed)",
			doc.KubernetesVersion, version)
	}
	return nil
}

// kubeadmError is the KubeadmError of a run of kubeadm that failed.
func kubeadmError(args []string, err error, stderr, stdout *proc.Tail) error {
	var run *proc.RunError
	if !errors.As(err, &run) {
		return err
	}
	kerr := &KubeadmError{Args: args, ExitCode: run.ExitCode, TimedOut: run.TimedOut, Timeout: run.Timeout, TooLarge: run.TooLarge, Err: run}
	if run.TooLarge {
		kerr.Lines = lastLines(stderr) // not the flood
	} else {
		kerr.Lines = lastLines(stderr, stdout)
	}
	return kerr
}

// KubeadmError is a run of kubeadm that failed: its exit code and its last
// lines, which say why.
type KubeadmError struct {
	Args []string
	// ExitCode is kubeadm's, or -1 when it did not exit by itself.
	ExitCode int
	// TimedOut: it was stopped after Timeout.
	TimedOut bool
	Timeout  time.Duration
	// TooLarge: it printed more than MaxOutputBytes and was stopped.
	TooLarge bool
	// Err is how it ended: a *proc.RunError once it ran.
	Err error
	// Lines are the last lines it printed: on its standard error, or on its
	// standard output when it said nothing there (unless it printed too
	// much there).
	Lines []string
}

func (e *KubeadmError) Error() string {
	var what string
	switch {
	case e.TooLarge:
		what = fmt.Sprintf("printed more than %d MiB and was stopped", MaxOutputBytes>>20)
	case e.TimedOut:
		what = fmt.Sprintf("did not finish within %s", e.Timeout)
	case e.ExitCode > 0, e.ExitCode == 0 && e.Err == nil:
		what = fmt.Sprintf("exited %d", e.ExitCode)
	default:
		what = fmt.Sprintf("failed: %v", e.Err)
		var run *proc.RunError
		if errors.As(e.Err, &run) {
			what = run.How() // could not start, was interrupted, left its output open, ...
		}
	}
	msg := "kubeadm " + strings.Join(e.command(), " ") + " " + what
	if len(e.Lines) > 0 {
		msg += ": " + strings.Join(e.Lines, "; ")
	}
	return msg
}

func (e *KubeadmError) Unwrap() error { return e.Err }

// command is kubeadm's subcommand and phase, without the flags.
func (e *KubeadmError) command() []string {
	for i, a := range e.Args {
		if strings.HasPrefix(a, "-") {
			return append(e.Args[:i:i], "--dry-run")
		}
	}
	return e.Args
}

// The last lines a KubeadmError shows, each at most maxLineBytes.
const (
	lastLineCount = 5
	maxLineBytes  = 512
)

// lastLines returns the last lines of the first tail that has any (stderr,
// then stdout), leaving out kubeadm's hint about --v=5.
func lastLines(tails ...*proc.Tail) []string {
	for _, t := range tails {
		lines := t.Lines(lastLineCount)
		for i, l := range lines {
			if len(l) > maxLineBytes {
				lines[i] = l[:maxLineBytes] + "..."
			}
		}
		if len(lines) > 0 {
			return lines
		}
	}
	return nil
}
