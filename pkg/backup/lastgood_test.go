package backup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// TestDamagedLastGoodRecordKeepsTheOthers (review B2): another node's last
// known good record is damaged (edited by hand, truncated). Pruning still
// keeps cp-0's last known good and its manifest backups, prunes the rest,
// and reports the damaged record. reconfigure --latest-good on cp-0 still
// finds its backup.
func TestDamagedLastGoodRecordKeepsTheOthers(t *testing.T) {
	for _, damage := range []struct{ name, content string }{
		{"truncated", `{"node": "cp-1", "backup": "2026`},
		{"not a backup name", `{"node": "cp-1", "backup": "../../etc/kubernetes/admin.conf"}`},
	} {
		t.Run(damage.name, func(t *testing.T) {
			s := &Store{Dir: t.TempDir()}
			var all []*Backup
			for range 5 {
				b, err := s.Write(doc(t), reconfigureMeta())
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.WriteManifest([]byte(manifest), ManifestMeta{Node: "cp-0", Component: "kube-apiserver", ConfigBackup: b.Name}); err != nil {
					t.Fatal(err)
				}
				all = append(all, b)
			}
			if err := s.MarkLastGood(all[0], "cp-0"); err != nil {
				t.Fatal(err)
			}
			damaged := "last-known-good--kube-system--kubeadm-config--cp-1.json"
			if err := os.WriteFile(filepath.Join(s.Dir, damaged), []byte(damage.content), 0o600); err != nil {
				t.Fatal(err)
			}
			removed, err := s.Prune(2)
			if diff := cmp.Diff([]string{all[1].Name, all[2].Name}, removed); diff != "" {
				t.Fatalf("removed (-want +got):\n%s", diff)
			}
			if exitcode.FromError(err) != exitcode.Invalid || !strings.Contains(err.Error(), damaged) {
				t.Fatalf("prune: %v, want the damaged record reported", err)
			}
			if _, err := s.LastGood("kube-system", "kubeadm-config", "cp-0"); err != nil {
				t.Fatalf("cp-0's last known good is gone: %v", err)
			}
			if got, _ := s.Manifests(all[0].Name); len(got) != 1 {
				t.Fatalf("cp-0's manifest backups are gone: %v", got)
			}
			// The automatic prune after a backup keeps it as well.
			if _, err := s.PruneOwner(1, all[0].Owner()); exitcode.FromError(err) != exitcode.Invalid {
				t.Fatalf("prune of one ConfigMap: %v, want the damaged record reported", err)
			}
			if _, err := s.LastGood("kube-system", "kubeadm-config", "cp-0"); err != nil {
				t.Fatalf("cp-0's last known good is gone after PruneOwner: %v", err)
			}
			marks, err := s.LastGoods()
			if len(marks) != 1 || marks[0].Node != "cp-0" || exitcode.FromError(err) != exitcode.Invalid {
				t.Fatalf("LastGoods = %+v, %v; want cp-0's and the damaged one reported", marks, err)
			}
		})
	}
}
