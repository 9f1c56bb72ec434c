package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Trust in the backup directory (review B1), through the built binary.

// nobody is "another user" on the test machine.
const nobody = 65534

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
}

// TestRestoreRefusesASwappedBackupDirectory: the backup directory sits in a
// directory another user owns and anyone may write. After a backup is
// taken, that user renames the backup directory away and puts one of their
// own in its place, holding a forged backup under the real one's name, with
// a checksum that holds. restore NAME refuses it (exit 2) and writes
// nothing, even with --no-backup (no write to the directory to refuse).
func TestRestoreRefusesASwappedBackupDirectory(t *testing.T) {
	needRoot(t)
	e := newEnv(t)
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(shared, "backups")
	r := e.plugin("backup", "--backup-dir", dir)
	wantExit(t, r, 0)
	saved := strings.TrimSpace(r.stdout)
	wantExit(t, e.plugin("patch", "--no-backup", "--set", "clusterName=live"), 0)
	before := e.document()

	// The other user's doing.
	chownTo(t, shared)
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	chownTo(t, dir)
	forged := forgeBackup(t, filepath.Join(dir+".old", filepath.Base(saved)), "clusterName: forged")
	path := filepath.Join(dir, filepath.Base(saved))
	if err := os.WriteFile(path, forged, 0o600); err != nil {
		t.Fatal(err)
	}
	chownTo(t, path)

	// --no-backup: the read alone must refuse, not the backup a restore
	// takes first.
	r = e.plugin("restore", filepath.Base(saved), "--backup-dir", dir, "--no-backup")
	wantExit(t, r, 2)
	if !strings.Contains(r.stderr, "refusing backup directory") {
		t.Fatalf("want the directory refused: %s", r)
	}
	if e.document() != before {
		t.Fatal("the forged backup was restored")
	}
}

func chownTo(t *testing.T, path string) {
	t.Helper()
	if err := os.Lchown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
}

// forgeBackup returns the backup at path with its clusterName line replaced
// by line and its checksum recomputed, as anyone who can write the file can.
func forgeBackup(t *testing.T, path, line string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	header, doc := lines[:11], strings.Join(lines[11:], "") // the magic line and ten header fields
	var out []string
	for _, l := range strings.SplitAfter(doc, "\n") {
		if strings.HasPrefix(l, "clusterName: ") {
			l = line + "\n"
		}
		out = append(out, l)
	}
	doc = strings.Join(out, "")
	sum := sha256.Sum256([]byte(doc))
	header[10] = "# sha256: " + hex.EncodeToString(sum[:]) + "\n"
	if !strings.Contains(doc, line) {
		t.Fatalf("the backup has no clusterName to forge:\n%s", doc)
	}
	return []byte(strings.Join(header, "") + doc)
}

// TestNoBackupDirectoryWithoutHome: a user other than root without HOME
// (nor KUBEADMCFG_BACKUP_DIR or XDG_STATE_HOME) gets no backup directory in
// /tmp, which other users share, but one clear error naming what to set.
func TestNoBackupDirectoryWithoutHome(t *testing.T) {
	needRoot(t)
	// A copy of the plugin that the other user can run.
	bin, err := os.MkdirTemp("", "kubeadmcfg-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(bin, "kubectl-kubeadmcfg")
	copyFile(t, filepath.Join(s.binDir, "kubectl-kubeadmcfg"), plugin, 0o755)

	cmd := exec.Command(plugin, "backup", "list")
	cmd.Dir, cmd.Env = bin, []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	r := runCmd(t, cmd)
	wantExit(t, r, 2)
	for _, want := range []string{"no backup directory: HOME is not set", "--backup-dir", "KUBEADMCFG_BACKUP_DIR"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q: %s", want, r)
		}
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
