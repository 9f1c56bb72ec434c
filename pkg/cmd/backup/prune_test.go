package backup

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	backupstore "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// TestPruneReportsWhatItRemovedBeforeTheDamagedRecord: another node's last
// known good record is damaged, so prune removes the old backups and then
// fails with exit 3 naming the record. What it removed is printed first, as
// text and with -o json: the files are gone, and the list is the only
// account of them.
func TestPruneReportsWhatItRemovedBeforeTheDamagedRecord(t *testing.T) {
	doc, err := os.ReadFile("../../../testdata/documents/v1beta4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, output := range []string{"", "json"} {
		t.Run("output "+output, func(t *testing.T) {
			store := &backupstore.Store{Dir: t.TempDir()}
			var names []string
			for i := range 4 {
				b, err := store.Write(doc, backupstore.Meta{Server: "https://127.0.0.1:6443", Namespace: "kube-system",
					ConfigMap: "kubeadm-config", UID: "u-1", ResourceVersion: fmt.Sprint(800 + i), Reason: backupstore.ReasonManual})
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, b.Name)
			}
			damaged := "last-known-good--kube-system--kubeadm-config--cp-1.json"
			if err := os.WriteFile(filepath.Join(store.Dir, damaged), []byte(`{"node": "cp-1", "backup": "20`), 0o600); err != nil {
				t.Fatal(err)
			}
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			o := NewPruneOptions(streams)
			o.Backup.Dir, o.Backup.Keep, o.Print.OutputFormat = store.Dir, 2, output
			if err := o.Print.Complete(); err != nil {
				t.Fatal(err)
			}
			err := o.Run(t.Context())
			if exitcode.FromError(err) != exitcode.Invalid || !strings.Contains(err.Error(), "last known good record "+damaged+" is damaged") {
				t.Fatalf("err %v, want exit 3 naming %s", err, damaged)
			}
			var removed []string
			if output == "json" {
				var got struct{ Removed []string }
				if err := json.Unmarshal(out.Bytes(), &got); err != nil {
					t.Fatalf("-o json printed %q: %v", out, err)
				}
				removed = got.Removed
			} else {
				for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
					removed = append(removed, strings.TrimPrefix(line, "removed "))
				}
				if !strings.Contains(errOut.String(), "2 backups removed") {
					t.Errorf("stderr %q", errOut)
				}
			}
			if diff := cmp.Diff(names[:2], removed); diff != "" {
				t.Errorf("printed as removed (-want +got):\n%s", diff)
			}
		})
	}
}
