package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hack/localcluster up empties its --dir before it starts the demo's
// control plane, and stops the processes the pid files there name: only in
// a directory that is empty or that an earlier up filled.

func TestLocalClusterUpDir(t *testing.T) {
	tool := filepath.Join(s.binDir, "localcluster")

	t.Run("a directory up did not fill is refused with exit 2 and left as it was", func(t *testing.T) {
		foreign := t.TempDir()
		// A process whose pid a file of the directory names, as up's own
		// pid files do: up must not stop it either.
		sleeper := exec.Command("sleep", "600")
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
		files := map[string]string{"precious": "keep me", "kube-apiserver.pid": strconv.Itoa(sleeper.Process.Pid)}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(foreign, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		// Should up start a control plane after all (its kubeconfig shows
		// it), it is stopped.
		t.Cleanup(func() {
			if _, err := os.Stat(filepath.Join(foreign, "kubeconfig")); err == nil {
				_ = exec.Command(tool, "down", "--dir", foreign).Run()
			}
		})
		r := runLong(t, 3*time.Minute, tool, "up", "--dir", foreign)
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		if r.code != 2 || len(lines) != 1 || !strings.Contains(lines[0], "--dir "+foreign+" is not empty and holds no earlier up") {
			t.Errorf("want exit 2 and one line naming the directory, got %s", r)
		}
		if r.stdout != "" {
			t.Errorf("up printed a kubeconfig: %q", r.stdout)
		}
		entries, err := os.ReadDir(foreign)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != len(files) {
			t.Errorf("the directory holds %d files, want the %d it had", len(entries), len(files))
		}
		for name, content := range files {
			if data, err := os.ReadFile(filepath.Join(foreign, name)); err != nil || string(data) != content {
				t.Errorf("%s was touched: %q, %v", name, data, err)
			}
		}
		// Stopped, it would be a zombie until the test reaps it.
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", sleeper.Process.Pid)); err != nil || strings.Contains(string(stat), ") Z ") {
			t.Errorf("the process the pid file names was stopped: %q, %v", stat, err)
		}
	})

	t.Run("an empty directory, then its own: up starts, up again replaces, down stops", func(t *testing.T) {
		dir := filepath.Join(keptDir(t), "demo")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = exec.Command(tool, "down", "--dir", dir).Run() })
		for i := range 2 {
			r := runLong(t, 3*time.Minute, tool, "up", "--dir", dir)
			if r.code != 0 || strings.TrimSpace(r.stdout) != filepath.Join(dir, "kubeconfig") {
				t.Fatalf("up #%d: want exit 0 and the kubeconfig's path, got %s", i+1, r)
			}
		}
		wantExit(t, runLong(t, time.Minute, tool, "down", "--dir", dir), 0)
		if left := processesNaming(t, dir); left != "" {
			t.Errorf("processes outlived down:\n%s", left)
		}
	})
}
