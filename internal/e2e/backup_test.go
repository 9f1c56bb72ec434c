package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// backups lists the backup names in dir through the plugin.
func backups(t *testing.T, dir string) []map[string]any {
	t.Helper()
	r := run(t, "kubectl", "kubeadmcfg", "backup", "list", "--backup-dir", dir, "-o", "json")
	wantExit(t, r, 0)
	var list []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("backup list -o json: %v: %s", err, r.stdout)
	}
	return list
}

// stripHeader returns the document a backup file holds.
func stripHeader(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	return []byte(strings.Join(lines[11:], "")) // the magic line and ten header fields
}

func TestPatchBacksUpTheReplacedDocument(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(t.TempDir(), "created-by-the-plugin")
	before := e.document()
	rv := e.configMapRV()
	wantExit(t, e.plugin("patch", "--backup-dir", dir, "--set", "apiServer.extraArgs.v=2"), 0)
	list := backups(t, dir)
	if len(list) != 1 {
		t.Fatalf("want one backup, got %v", list)
	}
	if list[0]["resourceVersion"] != rv || list[0]["checksumOK"] != true {
		t.Fatalf("backup %v, want resourceVersion %s", list[0], rv)
	}
	path := list[0]["path"].(string)
	if got := stripHeader(t, path); string(got) != before {
		t.Fatalf("the backup is not the replaced document:\n%s", got)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup mode %v, %v", fi.Mode(), err)
	}
	if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v, %v", di.Mode(), err)
	}
	// kubeadm takes the backup file as it is, header and all.
	data, _ := os.ReadFile(path)
	if ok, out := kubeadmValidate(t, data); !ok {
		t.Fatalf("kubeadm refuses the backup file: %s", out)
	}
	// --no-backup writes none.
	wantExit(t, e.plugin("patch", "--backup-dir", dir, "--no-backup", "--set", "apiServer.extraArgs.v=3"), 0)
	if n := len(backups(t, dir)); n != 1 {
		t.Fatalf("--no-backup wrote a backup (%d)", n)
	}
}

func TestRestoreWritesTheBackupBack(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	r := e.plugin("backup", "--backup-dir", dir)
	wantExit(t, r, 0)
	saved := strings.TrimSpace(r.stdout)
	wantExit(t, e.plugin("patch", "--backup-dir", dir, "--set", "apiServer.extraArgs.v=2", "--set", "clusterName=changed"), 0)

	r = e.plugin("restore", "--latest", "--backup-dir", dir, "--dry-run=server")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "-clusterName: changed") {
		t.Fatalf("restore shows no diff: %s", r)
	}
	if strings.Contains(e.document(), "clusterName: kubernetes") {
		t.Fatal("a dry run restored")
	}
	r = e.plugin("restore", filepath.Base(saved), "--backup-dir", dir)
	wantExit(t, r, 0)
	if got := e.document(); got != string(stripHeader(t, saved)) {
		t.Fatalf("live document differs from the backup:\n%s", got)
	}
	// Restoring again changes nothing.
	r = e.plugin("restore", filepath.Base(saved), "--backup-dir", dir)
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "unchanged") {
		t.Fatalf("want unchanged: %s", r)
	}
	// "The latest" leaves out what restores replaced: running it twice does
	// not flip back to the patched document.
	wantExit(t, e.plugin("patch", "--backup-dir", dir, "--set", "clusterName=broken"), 0)
	wantExit(t, e.plugin("restore", "--latest", "--backup-dir", dir), 0)
	wantExit(t, e.plugin("restore", "--latest", "--backup-dir", dir), 0)
	if strings.Contains(e.document(), "clusterName: broken") {
		t.Fatal("a second restore --latest brought back the document the first one replaced")
	}
}

func TestRestoreRefusesAnotherConfigMapOrVersion(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	r := e.plugin("backup", "--backup-dir", dir)
	wantExit(t, r, 0)
	name := filepath.Base(strings.TrimSpace(r.stdout))

	// Another kubernetesVersion: an upgrade happened since the backup.
	wantExit(t, e.plugin("patch", "--no-backup", "--set", "kubernetesVersion=v1.37.3"), 0)
	rv := e.configMapRV()
	r = e.plugin("restore", name, "--backup-dir", dir)
	wantExit(t, r, 4)
	if !strings.Contains(r.stderr, "across an upgrade") || e.configMapRV() != rv {
		t.Fatalf("restore across an upgrade not refused: %s", r)
	}

	// Another uid: the ConfigMap was re-created.
	if err := s.admin.CoreV1().ConfigMaps(e.ns).Delete(context.Background(), "kubeadm-config", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cluster.PutConfigMap(context.Background(), e.ns, "kubeadm-config", map[string]string{"ClusterConfiguration": s.seedDoc}); err != nil {
		t.Fatal(err)
	}
	rv = e.configMapRV()
	r = e.plugin("restore", name, "--backup-dir", dir)
	wantExit(t, r, 4)
	if !strings.Contains(r.stderr, "re-created ConfigMap") || e.configMapRV() != rv {
		t.Fatalf("restore onto another uid not refused: %s", r)
	}
	wantExit(t, e.plugin("restore", name, "--backup-dir", dir, "--force"), 0)
}

func TestRestoreToFileForKubeadm(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	wantExit(t, e.plugin("backup", "--backup-dir", dir), 0)
	file := filepath.Join(t.TempDir(), "kubeadm.yaml")
	rv := e.configMapRV()
	r := run(t, "kubectl", "kubeadmcfg", "restore", "--latest", "-n", e.ns, "--backup-dir", dir, "--to-file", file,
		"--node-name", "controller-1", "--advertise-address", "192.0.2.11", "--bind-port", "6443")
	wantExit(t, r, 0)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "kind: InitConfiguration") || !strings.Contains(string(data), "name: controller-1") {
		t.Fatalf("no InitConfiguration:\n%s", data)
	}
	if ok, out := kubeadmValidate(t, data); !ok {
		t.Fatalf("kubeadm refuses the restored file: %s\n%s", out, data)
	}
	if e.configMapRV() != rv || strings.Contains(e.document(), "controller-1") {
		t.Fatal("--to-file touched the ConfigMap")
	}
	wantExit(t, e.plugin("restore", "--latest", "--backup-dir", dir, "--node-name", "x"), 2)
}

func TestWriteConfig(t *testing.T) {
	e := newEnv(t)
	file := filepath.Join(t.TempDir(), "kubeadm-config.yaml")
	wantExit(t, e.plugin("patch", "--set", "apiServer.extraArgs.v=2", "--write-config", file), 0)
	data, err := os.ReadFile(file)
	if err != nil || string(data) != e.document() {
		t.Fatalf("--write-config on patch: %v\n%s", err, data)
	}
	file2 := filepath.Join(t.TempDir(), "get.yaml")
	wantExit(t, e.plugin("get", "--write-config", file2), 0)
	if fi, err := os.Stat(file2); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("--write-config on get: %v %v", fi, err)
	}
}

func TestCorruptedBackupsAreRefused(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, path string)
	}{
		{"flipped byte", func(t *testing.T, path string) {
			data, _ := os.ReadFile(path)
			data[len(data)-5] ^= 0x20
			os.WriteFile(path, data, 0o600)
		}},
		{"truncated", func(t *testing.T, path string) {
			data, _ := os.ReadFile(path)
			os.WriteFile(path, data[:len(data)/2], 0o600)
		}},
		{"truncated header", func(t *testing.T, path string) {
			data, _ := os.ReadFile(path)
			os.WriteFile(path, data[:100], 0o600)
		}},
		{"checksum mismatch", func(t *testing.T, path string) {
			data, _ := os.ReadFile(path)
			os.WriteFile(path, []byte(strings.Replace(string(data), "clusterName: kubernetes", "clusterName: tampered", 1)), 0o600)
		}},
		{"not YAML", func(t *testing.T, path string) {
			os.WriteFile(path, []byte("\x00\x01\x02 not yaml [{"), 0o600)
		}},
		{"symlink", func(t *testing.T, path string) {
			target := path + ".real"
			os.Rename(path, target)
			os.Symlink(target, path)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := e.plugin("backup", "--backup-dir", dir)
			wantExit(t, r, 0)
			path := strings.TrimSpace(r.stdout)
			tc.corrupt(t, path)
			wantExit(t, e.plugin("backup", "verify", "--all", "--backup-dir", dir), 3)
			wantExit(t, e.plugin("backup", "verify", filepath.Base(path), "--backup-dir", dir), 3)
			rv := e.configMapRV()
			r = e.plugin("restore", filepath.Base(path), "--backup-dir", dir, "--force")
			if r.code == 0 {
				t.Fatalf("restore accepted a corrupted backup: %s", r)
			}
			wantExit(t, r, 3)
			if e.configMapRV() != rv {
				t.Fatal("a corrupted backup was restored")
			}
		})
	}
}

// TestBackupSurvivesSIGKILL kills the plugin at random moments while it
// writes backups; afterwards every file under a backup name verifies.
func TestBackupSurvivesSIGKILL(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	plugin := filepath.Join(s.binDir, "kubectl-kubeadmcfg")
	const runs = 200
	backupCmd := func() *exec.Cmd {
		return exec.Command(plugin, "backup", "--backup-dir", dir, "--keep", "1000",
			"--kubeconfig", s.cluster.Kubeconfig, "-n", e.ns)
	}
	// Time one whole backup, so the kills spread over a process's whole life
	// on this machine, whatever its speed.
	start := time.Now()
	if out, err := backupCmd().CombinedOutput(); err != nil {
		t.Fatalf("backup: %v: %s", err, out)
	}
	life := time.Since(start)
	killed := 0
	for i := range runs {
		cmd := backupCmd()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(life) * 3 / 2)))
		if cmd.Process.Signal(syscall.SIGKILL) == nil {
			killed++
		}
		_ = cmd.Wait()
		_ = i
	}
	r := e.plugin("backup", "verify", "--all", "--backup-dir", dir)
	wantExit(t, r, 0)
	n := len(backups(t, dir)) - 1 // less the timed one
	t.Logf("%d runs over a %s process life, %d killed, %d complete backups, all verify", runs, life, killed, n)
	if n == 0 || n == runs {
		t.Fatalf("the kills should land both before and after some backups: %d of %d complete", n, runs)
	}
}

// TestBackupsOfTwoClustersNeverCross: one backup directory serves a
// ConfigMap that was deleted and created again (a new uid: to the plugin,
// another cluster). Fifty patches of the new one never prune the old one's
// backups, restore --latest takes the new one's own backup, and backup list
// says whose each backup is.
func TestBackupsOfTwoClustersNeverCross(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	for i := range 3 {
		wantExit(t, e.plugin("patch", "--backup-dir", dir, "--keep", "5", "--set", fmt.Sprintf("apiServer.extraArgs.old=%d", i)), 0)
	}
	oldUID := e.configMapUID()
	if _, err := s.cluster.PutConfigMap(context.Background(), e.ns, "kubeadm-config", map[string]string{"ClusterConfiguration": s.seedDoc}); err != nil {
		t.Fatal(err)
	}
	newUID := e.configMapUID()
	for i := range 50 {
		wantExit(t, e.plugin("patch", "--backup-dir", dir, "--keep", "5", "--set", fmt.Sprintf("apiServer.extraArgs.new=%d", i)), 0)
	}
	count := map[string]int{}
	for _, b := range backups(t, dir) {
		count[b["uid"].(string)]++
		if b["server"] != s.cluster.URL {
			t.Errorf("backup %v does not name its server", b)
		}
	}
	if count[oldUID] != 3 || count[newUID] != 5 {
		t.Fatalf("backups per uid %v, want 3 of the old ConfigMap and 5 of the new", count)
	}
	// The newest file in the directory is another cluster's.
	list := backups(t, dir)
	data, err := os.ReadFile(list[len(list)-1]["path"].(string))
	if err != nil {
		t.Fatal(err)
	}
	foreign := writeForeignBackup(t, dir, data, "uid: ", "uid: 00000000-0000-0000-0000-000000000000")
	r := e.plugin("restore", "--latest", "--backup-dir", dir, "--no-backup")
	wantExit(t, r, 0)
	if strings.Contains(r.stderr, filepath.Base(foreign)) || !strings.Contains(r.stderr, filepath.Base(list[len(list)-1]["path"].(string))) {
		t.Fatalf("restore --latest did not take the live ConfigMap's own newest backup: %s", r)
	}
}

func (e *env) configMapUID() string {
	e.t.Helper()
	cm, err := s.admin.CoreV1().ConfigMaps(e.ns).Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return string(cm.UID)
}
