package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/lazyregexp"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
)

// Renderer renders static Pod manifests with the real kubeadm, never by
// hand: `kubeadm init phase control-plane COMPONENT --config FILE --dry-run`
// (`kubeadm init phase etcd local` for Etcd) with KUBEADM_INIT_DRYRUN_DIR
// set to a private temporary directory, where kubeadm (1.36 and 1.37 are
// known to) writes the manifests it would install. kubeadm writes nothing else, and nothing under
// /etc/kubernetes.
type Renderer struct {
	// Kubeadm is the kubeadm binary: a path, or a name looked up in PATH.
	Kubeadm string
}

// Render renders the manifests of components from configFile, a kubeadm
// config file holding a ClusterConfiguration and this node's
// InitConfiguration.
func (r Renderer) Render(ctx context.Context, configFile []byte, components []Component) (map[Component][]byte, error) {
	bin, err := proc.LookPath(r.Kubeadm)
	if err != nil {
		return nil, fmt.Errorf("cannot run kubeadm: %w", err)
	}
	// Without KUBEADM_INIT_DRYRUN_DIR a dry run writes under
	// /etc/kubernetes/tmp, and 1.36 is the oldest release known to honour
	// it: refuse an older kubeadm before it runs.
	if _, err := kubeadmVersion(ctx, bin); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kubeadmcfg-render-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	config := filepath.Join(dir, "kubeadm.yaml")
	if err := os.WriteFile(config, configFile, 0o600); err != nil {
		return nil, err
	}
	out := map[Component][]byte{}
	for _, c := range components {
		manifests := filepath.Join(dir, string(c))
		if err := os.Mkdir(manifests, 0o700); err != nil {
			return nil, err
		}
		cmd := proc.Command(bin, append(c.phase(), "--config", config, "--dry-run")...)
		cmd.Env = []string{"KUBEADM_INIT_DRYRUN_DIR=" + manifests}
		output := &proc.Tail{Keep: maxKubeadmOutput}
		cmd.Stdout, cmd.Stderr = output, output
		if err := cmd.Run(ctx); err != nil {
			return nil, &KubeadmError{Component: c, Err: err, Output: output.String()}
		}
		data, err := input.ReadFile(filepath.Join(manifests, c.File()))
		if errors.Is(err, input.ErrTooLarge) {
			return nil, fmt.Errorf("kubeadm rendered a %s manifest %w", c.PodName(), input.ErrTooLarge)
		}
		if err != nil {
			return nil, fmt.Errorf("kubeadm rendered no %s manifest (is it 1.%d or later, which honours KUBEADM_INIT_DRYRUN_DIR?): %w", c.PodName(), MinKubeadmMinor, err)
		}
		out[c] = data
	}
	return out, nil
}

// maxKubeadmOutput bounds what a render keeps of kubeadm's output, its
// end: kubeadm says why it failed last, after its progress lines.
const maxKubeadmOutput = 1 << 20

// MinKubeadmMinor is the oldest kubeadm 1.x known to render into
// KUBEADM_INIT_DRYRUN_DIR. kubeadm 1.36 does as 1.37 does (its init reads
// the variable in constants.GetDryRunDir, and its control-plane and etcd
// phases write their manifests to that directory on a dry run); with 1.36
// renders, the agents give a verdict on a cluster before its upgrade to
// 1.37. An older release is not known to.
const MinKubeadmMinor = 36

// Version is the kubeadm binary's release, as `kubeadm version -o short`
// reports it (v1.37.2), refused when older than 1.36. reconfigure checks it
// against kubernetesVersion (CheckKubeadmRelease) before it renders.
func (r Renderer) Version(ctx context.Context) (string, error) {
	bin, err := proc.LookPath(r.Kubeadm)
	if err != nil {
		return "", fmt.Errorf("cannot run kubeadm: %w", err)
	}
	return kubeadmVersion(ctx, bin)
}

// kubeadmVersion reads bin's version, refusing a kubeadm older than 1.36.
func kubeadmVersion(ctx context.Context, bin string) (string, error) {
	out, err := proc.Command(bin, "version", "-o", "short").Output(ctx)
	if err != nil {
		return "", fmt.Errorf("cannot tell kubeadm's release: %w", err) // "BIN version exited 1: ..."
	}
	v := strings.TrimSpace(out)
	if _, err := parseMinor(v); err != nil {
		return "", fmt.Errorf("%s reports version %q: %w", bin, v, err)
	}
	return v, nil
}

// parseMinor reads the minor release of a kubeadm version such as v1.37.2,
// refusing anything before 1.36.
func parseMinor(v string) (int, error) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 || parts[0] != "1" {
		return 0, errors.New("want a kubeadm 1.x release")
	}
	minor, err := strconv.Atoi(parts[1])
	if err != nil {
		return 0, errors.New("want a kubeadm 1.x release")
	}
	if minor < MinKubeadmMinor {
		return minor, fmt.Errorf("kubeadm 1.%d is not known to render into KUBEADM_INIT_DRYRUN_DIR (without it a dry run writes under /etc/kubernetes/tmp); reconfigure needs 1.%d or later", minor, MinKubeadmMinor)
	}
	return minor, nil
}

// KubeadmError is kubeadm refusing to render a manifest: the document is
// one kubeadm does not take, which is the operator's to fix.
type KubeadmError struct {
	Component Component
	// Err is how kubeadm ended: a *proc.RunError once it ran.
	Err error
	// Output is what kubeadm printed, both outputs, its end kept.
	Output string
}

func (e *KubeadmError) Error() string {
	return fmt.Sprintf("kubeadm could not render the %s manifest: %s: %s", e.Component.PodName(), how(e.Err), kubeadmSays(e.Output))
}

// how says how kubeadm ended: a RunError in its few words ("exited 1"),
// not with the last lines it quotes, since Output is quoted whole.
func how(err error) string {
	var run *proc.RunError
	if errors.As(err, &run) {
		return run.How()
	}
	return fmt.Sprint(err)
}

func (e *KubeadmError) Unwrap() error { return e.Err }

// klogInfo matches klog's info and warning lines.
var klogInfo = lazyregexp.New(`^[IW]\d{4} \d\d:\d\d:\d\d`)

// kubeadmSays picks kubeadm's own error lines out of its output, leaving
// out the progress lines and the hint about --v=5.
func kubeadmSays(output string) string {
	var keep []string
	for _, line := range strings.Split(output, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "", strings.HasPrefix(line, "["), strings.HasPrefix(line, "To see the stack trace"), klogInfo().MatchString(line):
			continue
		}
		keep = append(keep, line)
	}
	if len(keep) == 0 {
		return strings.TrimSpace(output)
	}
	return strings.Join(keep, "; ")
}
