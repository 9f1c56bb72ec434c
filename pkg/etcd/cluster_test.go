package etcd_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/etcd"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// realEtcd starts a TLS etcd cluster of n members of the testbin etcd,
// named cp-0 ... as kubeadm names members after their nodes.
func realEtcd(t *testing.T, n int) (*testcluster.TLSEtcd, testcluster.Binaries) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real etcd processes; skipped with -short")
	}
	bins, err := testcluster.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	e, err := testcluster.StartTLSEtcd(context.Background(), bins.Etcd, testcluster.TLSEtcdOptions{Members: n, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range e.Members {
				log, _ := os.ReadFile(filepath.Join(e.Dir, m.Name+".log"))
				t.Logf("%s.log:\n%s", m.Name, tail(string(log), 20))
			}
		}
		e.Stop()
	})
	return e, bins
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// nodeClient is the client node i would build: its member's endpoint and
// kubeadm's pki.
func nodeClient(t *testing.T, e *testcluster.TLSEtcd, i int) *etcd.Client {
	t.Helper()
	creds, err := etcd.FindCredentials(e.PKI)
	if err != nil {
		t.Fatal(err)
	}
	c, err := etcd.New(etcd.Config{Endpoints: []string{e.Members[i].ClientURL}, Credentials: creds, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// rawClient is a plain clientv3 client of the whole cluster, for what the
// test does to it behind the package's back: writes, alarms.
func rawClient(t *testing.T, e *testcluster.TLSEtcd) *clientv3.Client {
	t.Helper()
	tlsConfig, err := transport.TLSInfo{
		CertFile: filepath.Join(e.PKI, "apiserver-etcd-client.crt"), KeyFile: filepath.Join(e.PKI, "apiserver-etcd-client.key"),
		TrustedCAFile: filepath.Join(e.PKI, "etcd", "ca.crt"),
	}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: e.ClientURLs(), TLS: tlsConfig, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func wantRefused(t *testing.T, err error) *etcd.RefusedError {
	t.Helper()
	var ref *etcd.RefusedError
	if !errors.As(err, &ref) {
		t.Fatalf("want a refusal, got %v", err)
	}
	if code := exitcode.FromError(err); code != exitcode.Conflict {
		t.Fatalf("exit code %d, want %d: %v", code, exitcode.Conflict, err)
	}
	return ref
}

// One 3-member cluster, taken through what a reconfiguration of node cp-1
// meets, in order: a healthy cluster, nodes that do not match, an alarm, a
// snapshot, a restart with a changed flag, a member killed, a member that
// never comes back.
func TestThreeMembers(t *testing.T) {
	e, bins := realEtcd(t, 3)
	ctx := context.Background()
	nodes := []string{"cp-0", "cp-1", "cp-2"}
	c1 := nodeClient(t, e, 1)
	raw := rawClient(t, e)

	healthy, err := c1.Preflight(ctx, etcd.PreflightOptions{Nodes: nodes})
	if err != nil {
		t.Fatalf("a healthy cluster is refused: %v", err)
	}
	ids := map[string]uint64{}
	for _, m := range healthy.Members {
		ids[m.Name] = m.ID
		if !m.Healthy() || m.Status == nil || m.Status.Leader == 0 {
			t.Fatalf("member %s: %+v", m, m)
		}
	}
	local, ok := healthy.LocalMember()
	if len(ids) != 3 || !ok || local.Name != "cp-1" {
		t.Fatalf("members %v, local %+v", ids, local)
	}

	t.Run("member list does not match the nodes", func(t *testing.T) {
		_, err := c1.Preflight(ctx, etcd.PreflightOptions{Nodes: []string{"cp-0", "cp-1", "cp-3"}})
		ref := wantRefused(t, err)
		if len(ref.NotNodes) != 1 || ref.NotNodes[0].Name != "cp-2" || fmt.Sprint(ref.NoMember) != "[cp-3]" || len(ref.Unhealthy) != 0 {
			t.Fatalf("refusal %+v", ref)
		}
		for _, want := range []string{fmt.Sprintf("etcd member cp-2 (ID %x, %s) is no control-plane node's", ids["cp-2"], e.Members[2].ClientURL), "control-plane node cp-3 has no etcd member"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	})

	t.Run("an alarm is raised", func(t *testing.T) {
		mt := pb.NewMaintenanceClient(raw.ActiveConnection())
		alarm := &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: ids["cp-2"], Alarm: pb.AlarmType_NOSPACE}
		if _, err := mt.Alarm(ctx, alarm); err != nil {
			t.Fatal(err)
		}
		disarmed := false
		disarm := func() {
			if _, err := raw.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: ids["cp-2"], Alarm: pb.AlarmType_NOSPACE}); err != nil {
				t.Fatal(err)
			}
			disarmed = true
		}
		defer func() { // so that a failure here does not fail what follows
			if !disarmed {
				disarm()
			}
		}()
		_, err := c1.Preflight(ctx, etcd.PreflightOptions{Nodes: nodes})
		ref := wantRefused(t, err)
		if len(ref.Alarms) != 1 || ref.Alarms[0].Type != "NOSPACE" || ref.Alarms[0].Member != "cp-2" || len(ref.Unhealthy) != 0 || ref.Quorum != nil {
			t.Fatalf("refusal %+v", ref)
		}
		if want := fmt.Sprintf("alarm NOSPACE on member cp-2 (ID %x) is raised", ids["cp-2"]); !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
		disarm()
		if _, err := c1.Preflight(ctx, etcd.PreflightOptions{Nodes: nodes}); err != nil {
			t.Fatalf("refused once the alarm is disarmed: %v", err)
		}
	})

	t.Run("snapshot", func(t *testing.T) {
		value := "written-before-the-snapshot-" + randomHex(t)
		put, err := raw.Put(ctx, "/registry/configmaps/kube-system/kubeadm-config", value)
		if err != nil {
			t.Fatal(err)
		}
		store := &backup.Store{Dir: filepath.Join(t.TempDir(), "backups")}
		snap, err := c1.Snapshot(ctx, store, etcd.SnapshotOptions{Node: "cp-1"})
		if err != nil {
			t.Fatal(err)
		}
		if snap.Member != "cp-1" || snap.MemberID != fmt.Sprintf("%016x", ids["cp-1"]) || snap.Revision < put.Header.Revision || snap.EtcdVersion == "" {
			t.Fatalf("snapshot %+v, want of member cp-1 at revision %d or later", snap.EtcdSnapshotMeta, put.Header.Revision)
		}
		for _, path := range []string{snap.Path, snap.Path + ".json"} {
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("%s: %v %v, want mode 0600", path, fi, err)
			}
		}
		read, err := store.ReadEtcdSnapshot(snap.Name)
		if err != nil {
			t.Fatal(err)
		}
		if problems, err := store.VerifyEtcdSnapshot(read); err != nil || len(problems) != 0 {
			t.Fatalf("verify: %v %q", err, problems)
		}
		data, err := os.ReadFile(snap.Path)
		if err != nil || !bytes.Contains(data, []byte(value)) {
			t.Fatalf("the snapshot does not hold the value written before it (%v)", err)
		}
		etcdutl := etcdutlBinary(bins)
		if etcdutl == "" {
			t.Skip("no etcdutl beside the testbin etcd (nor $ETCDUTL_BIN): the restore is not checked")
		}
		restored, err := testcluster.RestoreEtcdSnapshot(ctx, etcdutl, bins.Etcd, snap.Path, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer restored.Stop()
		rc, err := clientv3.New(clientv3.Config{Endpoints: []string{restored.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		got, err := rc.Get(ctx, "/registry/configmaps/kube-system/kubeadm-config")
		if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != value {
			t.Fatalf("restored data: %v %v, want %q", got, err, value)
		}
	})

	t.Run("a member restarted with a changed flag comes back", func(t *testing.T) {
		before, err := c1.Preflight(ctx, etcd.PreflightOptions{Nodes: nodes})
		if err != nil {
			t.Fatal(err)
		}
		local, _ := before.LocalMember()
		if err := e.Restart(1, "--snapshot-count=12345"); err != nil {
			t.Fatal(err)
		}
		after, err := c1.WaitBack(ctx, local, etcd.WaitOptions{Wait: time.Minute, Interval: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		back, _ := after.LocalMember()
		if back.ID != local.ID || !strings.Contains(strings.Join(e.Members[1].Args, " "), "--snapshot-count=12345") {
			t.Fatalf("back as %+v", back)
		}
	})

	t.Run("a member down refuses a change to another", func(t *testing.T) {
		e.Kill(2)
		_, err := c1.Preflight(ctx, etcd.PreflightOptions{Nodes: nodes})
		ref := wantRefused(t, err)
		if len(ref.Unhealthy) != 1 || ref.Unhealthy[0].Name != "cp-2" || ref.Unhealthy[0].ID != ids["cp-2"] || ref.Quorum == nil {
			t.Fatalf("refusal %+v", ref)
		}
		if want := fmt.Sprintf("refusing to change etcd member cp-1: etcd member cp-2 (ID %x, %s) is unhealthy: it does not answer", ids["cp-2"], e.Members[2].ClientURL); !strings.HasPrefix(err.Error(), want) {
			t.Errorf("error %q does not start with %q", err, want)
		}
		if !strings.Contains(err.Error(), "with it down, 1 of 3 voting members would be healthy, and quorum needs 2") {
			t.Errorf("error %q does not say quorum would be lost", err)
		}
	})

	t.Run("a member that never comes back", func(t *testing.T) {
		cp2, _ := healthy.Member(ids["cp-2"])
		if err := e.Restart(2, "--snapshot-count=not-a-number"); err != nil {
			t.Fatal(err)
		}
		_, err := nodeClient(t, e, 2).WaitBack(ctx, cp2, etcd.WaitOptions{Wait: 3 * time.Second, Interval: 200 * time.Millisecond})
		var notBack *etcd.NotBackError
		if !errors.As(err, &notBack) || notBack.Member.Name != "cp-2" || !strings.Contains(notBack.Last, "does not answer") {
			t.Fatalf("want cp-2 not back because it does not answer, got %v", err)
		}
		if e.Running(2) {
			t.Fatal("etcd took a flag it should refuse: the test shows nothing")
		}
	})
}

// etcdutlBinary is etcdutl beside the testbin etcd, where hack/testbin.sh
// builds the etcd release's tools, or $ETCDUTL_BIN.
func etcdutlBinary(bins testcluster.Binaries) string {
	for _, path := range []string{os.Getenv("ETCDUTL_BIN"), filepath.Join(filepath.Dir(bins.Etcd), "etcdutl")} {
		if fi, err := os.Stat(path); path != "" && err == nil && fi.Mode().IsRegular() {
			return path
		}
	}
	return ""
}

func randomHex(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
