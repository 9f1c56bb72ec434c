package backup

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/lazyregexp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/version"
)

// etcd snapshots: the data of a node's local etcd member, taken before the
// member is changed, kept beside the ClusterConfiguration backups. The .db
// file is exactly what etcd's Maintenance.Snapshot streamed: its database
// followed by the sha256 of that database, which is what `etcdutl snapshot
// restore FILE` reads and checks. What the store records about it (node,
// member, revision, and its own sha256 of the whole file) goes into a record
// NAME.json beside it: a header inside the file would make it one etcdutl
// refuses.
//
// A snapshot is written as the other files are: streamed into a temporary
// file, synced, its record linked into place, then the file linked to its
// name, which fails rather than replace one. A .db with a name of the kind
// therefore always has its record, unless someone removed it.

// etcdSnapshotFormat is the record's first field, naming its format.
const etcdSnapshotFormat = "kubectl-kubeadmcfg etcd snapshot v1"

// etcdSnapshotPattern matches snapshot names: time, etcd cluster ID, node,
// the revision the snapshot holds, and a random suffix.
var etcdSnapshotPattern = lazyregexp.New(`^(\d{8}T\d{6}\.\d{9}Z)-etcd-([0-9a-f]{16})-([a-z0-9.-]+)-rev(\d+)-([0-9a-f]{8})\.db$`)

// etcdRecordPattern matches the records beside the snapshots.
var etcdRecordPattern = lazyregexp.New(`^\d{8}T\d{6}\.\d{9}Z-etcd-[0-9a-f]{16}-[a-z0-9.-]+-rev\d+-[0-9a-f]{8}\.db\.json$`)

// etcdRecordSuffix turns a snapshot's name into its record's.
const etcdRecordSuffix = ".json"

// DefaultKeepEtcdSnapshots is how many snapshots of each node's member are
// kept: a snapshot is as large as the member's database (up to etcd's quota,
// 2 GiB by default), a ClusterConfiguration backup a few KiB, so they do not
// share the backups' count.
const DefaultKeepEtcdSnapshots = 3

// ReasonBeforeEtcdChange marks a snapshot taken before a node's etcd member
// was changed.
const ReasonBeforeEtcdChange = "before etcd change"

// EtcdSnapshotMeta is what the store records about an etcd snapshot.
type EtcdSnapshotMeta struct {
	// Node is the node whose local member the snapshot was taken from.
	Node string `json:"node"`
	// Member is that member's name, MemberID and ClusterID its and its
	// cluster's IDs, in hex as etcdctl prints them.
	Member    string `json:"member"`
	MemberID  string `json:"memberID"`
	ClusterID string `json:"clusterID"`
	// Revision is the member's store revision as the snapshot started:
	// the snapshot holds every write up to it (and perhaps a few more),
	// so every resourceVersion up to it. EtcdVersion is the member's.
	Revision    int64  `json:"revision"`
	EtcdVersion string `json:"etcdVersion"`
	Reason      string `json:"reason"`
	// Time, Size, SHA256 (of the whole file, etcd's own sha256 at its end
	// included) and PluginVersion are filled in by the store.
	Time          time.Time `json:"time"`
	Size          int64     `json:"size"`
	SHA256        string    `json:"sha256"`
	PluginVersion string    `json:"pluginVersion"`
}

// etcdRecord is the record file: the format, then the metadata.
type etcdRecord struct {
	Format string `json:"format"`
	EtcdSnapshotMeta
}

// EtcdSnapshot is one etcd snapshot of the store.
type EtcdSnapshot struct {
	Name string `json:"name"`
	Path string `json:"path"`
	EtcdSnapshotMeta
}

// IsEtcdSnapshotName reports whether name is the name of an etcd snapshot
// of the store, rather than of a ClusterConfiguration backup.
func IsEtcdSnapshotName(name string) bool { return etcdSnapshotPattern().MatchString(name) }

// WriteEtcdSnapshot streams etcd's snapshot r into the store as a new file
// of mode 0600 and returns it. meta's Time, Size, SHA256 and PluginVersion
// are filled in. The stream must end in the sha256 that etcd appends to a
// snapshot, or nothing is kept: a stream cut short is no snapshot. More than
// maxBytes is refused, and so is a snapshot that would leave less than a
// tenth of the directory's filesystem free (see checkSpace).
func (s *Store) WriteEtcdSnapshot(r io.Reader, meta EtcdSnapshotMeta, maxBytes int64) (*EtcdSnapshot, error) {
	if err := s.ensureDir(); err != nil {
		return nil, err
	}
	if err := checkSpace(s.Dir, maxBytes); err != nil {
		return nil, err
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return nil, err
	}
	meta.Time, meta.PluginVersion = s.now(), version.Version
	name := fmt.Sprintf("%s-etcd-%s-%s-rev%d-%s.db", meta.Time.Format(timeLayout), meta.ClusterID, meta.Node, meta.Revision, hex.EncodeToString(suffix))
	if !etcdSnapshotPattern().MatchString(name) {
		return nil, exitcode.Failuref("cannot name an etcd snapshot of node %q, cluster %q, revision %d", meta.Node, meta.ClusterID, meta.Revision)
	}
	final := filepath.Join(s.Dir, name)
	tmp, err := os.CreateTemp(s.Dir, tempPrefix+name+"-")
	if err != nil {
		return nil, exitcode.Failuref("write etcd snapshot: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := tmp.Chmod(0o600); err != nil {
		return nil, exitcode.Failuref("write etcd snapshot: %w", err)
	}
	sum := newSnapshotSum()
	n, err := io.Copy(io.MultiWriter(tmp, sum), io.LimitReader(r, maxBytes+1))
	if err != nil {
		return nil, exitcode.Failuref("receive the etcd snapshot: %w", err)
	}
	if n > maxBytes {
		return nil, exitcode.Failuref("the etcd snapshot is larger than %d bytes, more than the member's database can be; nothing was kept", maxBytes)
	}
	if !sum.etcdOK() {
		return nil, exitcode.Failuref("the etcd snapshot of %d bytes does not end in the sha256 etcd appends to it (the stream was cut short?); nothing was kept", n)
	}
	if err := errors.Join(tmp.Sync(), tmp.Close()); err != nil {
		return nil, exitcode.Failuref("write etcd snapshot: %w", err)
	}
	meta.Size, meta.SHA256 = n, sum.whole()
	record, err := json.MarshalIndent(etcdRecord{Format: etcdSnapshotFormat, EtcdSnapshotMeta: meta}, "", "  ")
	if err != nil {
		return nil, err
	}
	recordPath := final + etcdRecordSuffix
	if err := writeAtomic(recordPath, append(record, '\n'), false); err != nil {
		return nil, exitcode.Failuref("write etcd snapshot record: %w", err)
	}
	if err := os.Link(tmp.Name(), final); err != nil {
		_ = os.Remove(recordPath)
		return nil, exitcode.Failuref("write etcd snapshot: %w", err)
	}
	if err := syncDir(s.Dir); err != nil {
		return nil, exitcode.Failuref("write etcd snapshot: %w", err)
	}
	return &EtcdSnapshot{Name: name, Path: final, EtcdSnapshotMeta: meta}, nil
}

// EtcdSnapshots lists the store's etcd snapshots in the order of the times
// in their names. Like List, it lists damaged ones too.
func (s *Store) EtcdSnapshots() ([]string, error) {
	return s.names(etcdSnapshotPattern, "etcd snapshots")
}

// ReadEtcdSnapshot reads an etcd snapshot's record, checking the directory,
// the record and the snapshot file as the store does for every read. It
// does not read the snapshot itself: VerifyEtcdSnapshot does.
func (s *Store) ReadEtcdSnapshot(name string) (*EtcdSnapshot, error) {
	if name != filepath.Base(name) || !etcdSnapshotPattern().MatchString(name) {
		return nil, exitcode.Usagef("%q is not an etcd snapshot name (see 'kubectl kubeadmcfg backup list')", name)
	}
	f, path, err := s.openEtcdSnapshot(name)
	if err != nil {
		return nil, err
	}
	_ = f.Close() // read-only: nothing to lose
	data, _, _, err := s.readFile(name+etcdRecordSuffix, "etcd snapshot record", etcdRecordPattern)
	if exitcode.FromError(err) == exitcode.NotFound {
		return nil, exitcode.Invalidf("etcd snapshot %s has no record %s%s beside it (removed, or the file was not written by kubectl-kubeadmcfg)", name, name, etcdRecordSuffix)
	}
	if err != nil {
		return nil, err
	}
	var rec etcdRecord
	if err := json.Unmarshal(data, &rec); err != nil || rec.Format != etcdSnapshotFormat {
		return nil, exitcode.Invalidf("etcd snapshot %s: its record is damaged (not %q JSON)", name, etcdSnapshotFormat)
	}
	m := etcdSnapshotPattern().FindStringSubmatch(name)
	if rev, err := strconv.ParseInt(m[4], 10, 64); err != nil || rec.ClusterID != m[2] || rec.Node != m[3] || rec.Revision != rev {
		return nil, exitcode.Invalidf("etcd snapshot %s: its record is of cluster %s, node %s, revision %d, not what the name says", name, rec.ClusterID, rec.Node, rec.Revision)
	}
	return &EtcdSnapshot{Name: name, Path: path, EtcdSnapshotMeta: rec.EtcdSnapshotMeta}, nil
}

// openEtcdSnapshot opens a snapshot file the store trusts, after checking
// the directory.
func (s *Store) openEtcdSnapshot(name string) (*os.File, string, error) {
	notFound := exitcode.NotFoundf("etcd snapshot %s not found in %s", name, s.Dir)
	if err := s.checkDir(); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, "", notFound
		}
		return nil, "", err
	}
	f, _, err := s.open(name, "etcd snapshot")
	var distrust *untrustedError
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, "", notFound
	case errors.As(err, &distrust):
		return nil, "", exitcode.New(exitcode.Invalid, err)
	case err != nil:
		return nil, "", exitcode.Failuref("read etcd snapshot: %w", err)
	}
	return f, f.Name(), nil
}

// VerifyEtcdSnapshot reads the whole snapshot and returns every problem
// found: a size or sha256 other than its record's, or an end that is not
// the sha256 etcd appends to what comes before it (which `etcdutl snapshot
// restore` would refuse). The error is for a file that cannot be read.
func (s *Store) VerifyEtcdSnapshot(snap *EtcdSnapshot) ([]string, error) {
	f, _, err := s.openEtcdSnapshot(snap.Name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sum := newSnapshotSum()
	n, err := io.Copy(sum, f)
	if err != nil {
		return nil, exitcode.Failuref("read etcd snapshot %s: %w", snap.Name, err)
	}
	var problems []string
	if n != snap.Size {
		problems = append(problems, fmt.Sprintf("size mismatch: the record says %d bytes, the file has %d", snap.Size, n))
	}
	if got := sum.whole(); got != snap.SHA256 {
		problems = append(problems, fmt.Sprintf("checksum mismatch: the record says %s, the file hashes to %s", snap.SHA256, got))
	}
	if !sum.etcdOK() {
		problems = append(problems, "the file does not end in the sha256 of its database, as etcd writes a snapshot: etcdutl would refuse to restore it")
	}
	return problems, nil
}

// snapshotSum hashes a snapshot as it streams by: the whole file, and
// everything but its last sha256.Size bytes, which it keeps, since etcd ends
// a snapshot with the sha256 of what comes before.
type snapshotSum struct {
	wholeH, dbH hash.Hash
	tail        []byte
	n           int64
}

func newSnapshotSum() *snapshotSum {
	return &snapshotSum{wholeH: sha256.New(), dbH: sha256.New(), tail: make([]byte, 0, 2*sha256.Size)}
}

func (s *snapshotSum) Write(p []byte) (int, error) {
	s.n += int64(len(p))
	_, _ = s.wholeH.Write(p) // a hash never fails
	if len(p) >= sha256.Size {
		_, _ = s.dbH.Write(s.tail)
		_, _ = s.dbH.Write(p[:len(p)-sha256.Size])
		s.tail = append(s.tail[:0], p[len(p)-sha256.Size:]...)
		return len(p), nil
	}
	s.tail = append(s.tail, p...)
	if extra := len(s.tail) - sha256.Size; extra > 0 {
		_, _ = s.dbH.Write(s.tail[:extra])
		s.tail = s.tail[:copy(s.tail, s.tail[extra:])]
	}
	return len(p), nil
}

func (s *snapshotSum) whole() string { return hex.EncodeToString(s.wholeH.Sum(nil)) }

// etcdOK reports whether what streamed by is a snapshot as etcd writes one:
// a database of whole 512-byte sectors, then its sha256 (etcdutl's check).
func (s *snapshotSum) etcdOK() bool {
	return s.n%512 == sha256.Size && len(s.tail) == sha256.Size && string(s.dbH.Sum(nil)) == string(s.tail)
}
