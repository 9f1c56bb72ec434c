package backup

import (
	"errors"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// TestNoBackupDirectoryWithoutHome (review B1): without HOME (and without
// KUBEADMCFG_BACKUP_DIR or XDG_STATE_HOME), a user other than root has no
// backup directory; there is no fallback to /tmp, which other users share.
// Every use of a Store without a directory fails with ErrNoDir (exit 2),
// for writes and reads alike.
func TestNoBackupDirectoryWithoutHome(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	home := func(h string) func() (string, error) {
		return func() (string, error) {
			if h == "" {
				return "", errors.New("$HOME is not defined")
			}
			return h, nil
		}
	}
	cases := []struct {
		name string
		root bool
		env  map[string]string
		home string
		want string
	}{
		{"KUBEADMCFG_BACKUP_DIR", false, map[string]string{"KUBEADMCFG_BACKUP_DIR": "/srv/b"}, "", "/srv/b"},
		{"root", true, nil, "", "/etc/kubernetes/kubeadmcfg/backups"},
		{"XDG_STATE_HOME", false, map[string]string{"XDG_STATE_HOME": "/home/u/state"}, "", "/home/u/state/kubeadmcfg/backups"},
		{"HOME", false, nil, "/home/u", "/home/u/.local/state/kubeadmcfg/backups"},
		{"no HOME", false, nil, "", ""},
		{"relative HOME", false, nil, "u", ""},
		{"relative XDG_STATE_HOME and no HOME", false, map[string]string{"XDG_STATE_HOME": "state"}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := defaultDir(c.root, env(c.env), home(c.home)); got != c.want {
				t.Fatalf("defaultDir = %q, want %q", got, c.want)
			}
		})
	}
	s := &Store{}
	b := &Backup{Name: "20261129T191916.091292302Z-kubeadm-config-rv1-00000000.yaml", Meta: meta()}
	uses := map[string]func() error{
		"Write":        func() error { _, err := s.Write(doc(t), meta()); return err },
		"Read":         func() error { _, err := s.Read(b.Name); return err },
		"List":         func() error { _, err := s.List(); return err },
		"Latest":       func() error { _, err := s.Latest(b.Owner()); return err },
		"Prune":        func() error { _, err := s.Prune(1); return err },
		"MarkLastGood": func() error { return s.MarkLastGood(b, "cp-0") },
		"LastGood":     func() error { _, err := s.LastGood("kube-system", "kubeadm-config", "cp-0"); return err },
	}
	for name, use := range uses {
		if err := use(); !errors.Is(err, ErrNoDir) || exitcode.FromError(err) != exitcode.Usage {
			t.Errorf("%s without a directory: %v, want ErrNoDir (exit 2)", name, err)
		}
	}
}
