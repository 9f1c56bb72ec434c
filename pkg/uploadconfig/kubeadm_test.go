package uploadconfig

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeKubeadm is a kubeadm stand-in: it records its arguments, its
// --config file and KUBEADM_UPGRADE_DRYRUN_DIR in dir, then prints
// dir/stdout and dir/stderr and exits with dir/code (0 without it).
type fakeKubeadm struct {
	t        *testing.T
	dir      string // the stand-in's files
	path     string // the stand-in
	config   string // the UpgradeConfiguration it is given
	kubeadm  Kubeadm
	upgrades string // the directory of the UpgradeConfiguration
}

const upgradeConfiguration = `apiVersion: kubeadm.k8s.io/v1beta4
kind: UpgradeConfiguration
apply:
  kubernetesVersion: v1.37.2
  ignorePreflightErrors: [SystemVerification]
timeouts:
  upgradeManifests: 1m
`

func newFakeKubeadm(t *testing.T, script string) *fakeKubeadm {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the kubeadm stand-in is a shell script")
	}
	f := &fakeKubeadm{t: t, dir: t.TempDir(), upgrades: t.TempDir()}
	f.path = filepath.Join(f.dir, "kubeadm")
	if script == "" {
		script = `echo "$@" >"$dir/args"
cp "$7" "$dir/config"
echo "$KUBEADM_UPGRADE_DRYRUN_DIR" >"$dir/dryrundir"
[ -d "$KUBEADM_UPGRADE_DRYRUN_DIR" ] && [ "$(dirname "$7")" = "$KUBEADM_UPGRADE_DRYRUN_DIR" ] || exit 99
[ -f "$dir/stdout" ] && cat "$dir/stdout"
[ -f "$dir/stderr" ] && cat "$dir/stderr" >&2
[ -f "$dir/code" ] && exit "$(cat "$dir/code")"
exit 0`
	}
	if err := os.WriteFile(f.path, []byte("#!/bin/sh\ndir="+f.dir+"\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.config = filepath.Join(f.upgrades, "upgrade.yaml")
	f.write("../upgrades/upgrade.yaml", upgradeConfiguration)
	f.kubeadm = Kubeadm{Path: f.path, Config: f.config, Args: []string{"--kubeconfig", "/etc/kubernetes/admin.conf"}}
	return f
}

// write writes a file of the stand-in (or, as ../upgrades/upgrade.yaml,
// the UpgradeConfiguration).
func (f *fakeKubeadm) write(name, content string) {
	f.t.Helper()
	path := filepath.Join(f.dir, name)
	if strings.HasPrefix(name, "../upgrades/") {
		path = filepath.Join(f.upgrades, strings.TrimPrefix(name, "../upgrades/"))
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeKubeadm) read(name string) string {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(f.dir, name))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(data)
}

// The dry run is the phase itself, with the agent's UpgradeConfiguration
// plus apply.dryRun and apply.printConfig, in a directory of its own beside
// it that is also kubeadm's dry-run directory, and that is gone afterwards.
func TestKubeadmUpload(t *testing.T) {
	f := newFakeKubeadm(t, "")
	f.write("stdout", readTestdata(t, "dry-run-upgraded-from-1.36.3.txt"))
	f.write("stderr", "W1202 05:04:17.573722     172 cluster.go:130] a warning\n")
	up, err := f.kubeadm.Upload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if string(up.Read) != localclusterDoc || string(up.Written) != v137doc(t) || up.ResourceVersion != "217" {
		t.Errorf("got resourceVersion %s, read:\n%s\nwritten:\n%s", up.ResourceVersion, up.Read, up.Written)
	}
	dir := strings.TrimSpace(f.read("dryrundir"))
	if filepath.Dir(dir) != f.upgrades || !strings.HasPrefix(filepath.Base(dir), "kubeadmcfg-upload-config-") {
		t.Errorf("KUBEADM_UPGRADE_DRYRUN_DIR=%s, want a directory of its own beside %s", dir, f.config)
	}
	want := "upgrade apply phase upload-config kubeadm --config " + filepath.Join(dir, "upgrade-configuration.yaml") +
		" --dry-run --kubeconfig /etc/kubernetes/admin.conf\n"
	if got := f.read("args"); got != want {
		t.Errorf("kubeadm's arguments:\n got %s\nwant %s", got, want)
	}
	wantConfig := `apiVersion: kubeadm.k8s.io/v1beta4
apply:
  dryRun: true
  ignorePreflightErrors:
  - SystemVerification
  kubernetesVersion: v1.37.2
  printConfig: true
kind: UpgradeConfiguration
timeouts:
  upgradeManifests: 1m
`
	if diff := cmp.Diff(wantConfig, f.read("config")); diff != "" {
		t.Errorf("the dry run's UpgradeConfiguration (-want +got):\n%s", diff)
	}
	entries, err := os.ReadDir(f.upgrades)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("the dry run left files beside the UpgradeConfiguration: %v", entries)
	}
}

// A kubeadm that fails, hangs or floods is a *KubeadmError naming its exit
// and its last lines; one that succeeds without saying what it would write
// of the target version is an *OutputError; a configuration the dry run
// cannot be made from is refused before kubeadm runs.
func TestKubeadmUploadFails(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  string // the stand-in; the recording one when empty
		files   map[string]string
		timeout time.Duration
		want    string
		check   func(t *testing.T, err error)
	}{{
		name: "kubeadm refuses the document",
		files: map[string]string{"stdout": readTestdata(t, "v1beta3-refused.stdout"),
			"stderr": readTestdata(t, "v1beta3-refused.stderr"), "code": "1"},
		want: `kubeadm upgrade apply phase upload-config kubeadm --dry-run exited 1: ` +
			`W1202 05:09:16.559520     182 cluster.go:130] error unmarshaling configuration schema.GroupVersionKind{Group:"kubeadm.k8s.io", Version:"v1beta4", Kind:"ClusterConfiguration"}: no kind "ClusterConfiguration" is registered for version "kubeadm.k8s.io/v1beta3" in scheme "pkg/runtime/scheme.go:111"; ` +
			`error: [upgrade] FATAL: failed to decode cluster configuration data: no kind "ClusterConfiguration" is registered for version "kubeadm.k8s.io/v1beta3" in scheme "pkg/runtime/scheme.go:111"`,
		check: func(t *testing.T, err error) {
			var ke *KubeadmError
			if !errors.As(err, &ke) || ke.ExitCode != 1 || len(ke.Lines) != 2 {
				t.Errorf("want a *KubeadmError, exit 1, 2 lines: %#v", err)
			}
		},
	}, {
		name:  "kubeadm says nothing on stderr: its last lines on stdout",
		files: map[string]string{"stdout": "a\nb\nc\nd\ne\nf\ng\n", "code": "3"},
		want:  "kubeadm upgrade apply phase upload-config kubeadm --dry-run exited 3: c; d; e; f; g",
	}, {
		name:    "kubeadm hangs, and its children with it",
		script:  "echo started; sleep 30 & sleep 30; wait",
		timeout: 300 * time.Millisecond,
		want:    "kubeadm upgrade apply phase upload-config kubeadm --dry-run did not finish within 300ms: started",
	}, {
		name:   "kubeadm prints without end",
		script: "head -c 9000000 /dev/zero | tr '\\0' x; echo; echo done",
		want:   "kubeadm upgrade apply phase upload-config kubeadm --dry-run printed more than 8 MiB and was stopped",
	}, {
		name:  "kubeadm would write another version than the target",
		files: map[string]string{"../upgrades/upgrade.yaml": strings.Replace(upgradeConfiguration, "v1.37.2", "ci/latest", 1), "stdout": readTestdata(t, "dry-run-upgraded-from-1.36.3.txt")},
		want:  `kubeadm's dry run of upload-config kubeadm did not say what it would write: kubeadm printed kubernetesVersion "v1.37.2", not the target "ci/latest" (a CI label is uploaded as the label, not as the version printed)`,
	}, {
		name:  "kubeadm's output does not say",
		files: map[string]string{"stdout": "[upgrade] Reading configuration\n"},
		want:  "kubeadm's dry run of upload-config kubeadm did not say what it would write: kubeadm printed no copy of the kubeadm-config it read (is it a kubeadm of 1.31 or later, whose dry run reads the cluster?)",
	}, {
		name:  "no target version",
		files: map[string]string{"../upgrades/upgrade.yaml": "apiVersion: kubeadm.k8s.io/v1beta4\nkind: UpgradeConfiguration\n"},
		want:  "the UpgradeConfiguration UPGRADES/upgrade.yaml sets no apply.kubernetesVersion, the version kubeadm writes into kubeadm-config",
	}, {
		name:  "not an UpgradeConfiguration",
		files: map[string]string{"../upgrades/upgrade.yaml": "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n"},
		want:  `UPGRADES/upgrade.yaml holds a "ClusterConfiguration", not an UpgradeConfiguration`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeKubeadm(t, tc.script)
			for name, content := range tc.files {
				f.write(name, content)
			}
			f.kubeadm.Timeout = tc.timeout
			start := time.Now()
			_, err := f.kubeadm.Upload(context.Background())
			if err == nil {
				t.Fatal("no error")
			}
			if got := strings.ReplaceAll(err.Error(), f.upgrades, "UPGRADES"); got != tc.want {
				t.Errorf("error:\n got %s\nwant %s", got, tc.want)
			}
			if tc.check != nil {
				tc.check(t, err)
			}
			// Without its process group killed, the hanging kubeadm's
			// children would hold its output open for WaitDelay, 5s.
			if took := time.Since(start); took > 4*time.Second {
				t.Errorf("took %s", took)
			}
		})
	}
}
