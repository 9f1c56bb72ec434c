package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	backupstore "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// writeSnapshots puts two snapshots of node cp-0 into a new store, shaped
// as etcd streams them (pages, then their sha256).
func writeSnapshots(t *testing.T) (*backupstore.Store, []*backupstore.EtcdSnapshot) {
	t.Helper()
	store := &backupstore.Store{Dir: filepath.Join(t.TempDir(), "backups")}
	db := bytes.Repeat([]byte("etcd page "), 4096*2/10+1)[:4096*2]
	sum := sha256.Sum256(db)
	var snaps []*backupstore.EtcdSnapshot
	for _, rev := range []int64{7, 9} {
		s, err := store.WriteEtcdSnapshot(bytes.NewReader(append(db, sum[:]...)), backupstore.EtcdSnapshotMeta{
			Node: "cp-0", Member: "cp-0", MemberID: "00000000000000aa", ClusterID: "cdf818194e3a8c32", Revision: rev, EtcdVersion: "3.7.0",
		}, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, s)
	}
	return store, snaps
}

func TestEtcdSnapshotsListedVerifiedPruned(t *testing.T) {
	store, snaps := writeSnapshots(t)
	streams, _, out, _ := genericiooptions.NewTestIOStreams()

	list := NewListOptions(streams)
	list.Backup.Dir = store.Dir
	if err := list.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ETCD SNAPSHOT") || !strings.HasPrefix(lines[1], snaps[0].Name) ||
		!strings.Contains(lines[2], " cp-0 ") || !strings.Contains(lines[2], " 9 ") {
		t.Fatalf("list:\n%s", out)
	}

	out.Reset()
	list.Print.OutputFormat = "json"
	if err := list.Print.Complete(); err != nil {
		t.Fatal(err)
	}
	if err := list.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var items []map[string]any
	if err := json.Unmarshal(out.Bytes(), &items); err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || items[1]["kind"] != KindEtcdSnapshot || items[1]["revision"] != float64(9) || items[1]["checksumOK"] != nil {
		t.Fatalf("list -o json: %v", items)
	}

	out.Reset()
	verify := NewVerifyOptions(streams)
	verify.Backup.Dir, verify.All = store.Dir, true
	if err := verify.Run(context.Background()); err != nil {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	if want := snaps[0].Name + ": ok\n" + snaps[1].Name + ": ok\n"; out.String() != want {
		t.Fatalf("verify printed %q, want %q", out, want)
	}
	data, _ := os.ReadFile(snaps[1].Path)
	data[10] ^= 1
	if err := os.WriteFile(snaps[1].Path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	verify.All, verify.Names = false, []string{snaps[1].Name}
	err := verify.Run(context.Background())
	if exitcode.FromError(err) != exitcode.Invalid || !strings.Contains(out.String(), snaps[1].Name+": checksum mismatch") {
		t.Fatalf("verify of a damaged snapshot: %v\n%s", err, out)
	}

	out.Reset()
	prune := NewPruneOptions(streams)
	prune.Backup.Dir, prune.KeepEtcdSnapshots = store.Dir, 1
	if err := prune.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := "removed " + snaps[0].Name + "\n"; out.String() != want {
		t.Fatalf("prune printed %q, want %q", out, want)
	}
}
