// Package backup keeps timestamped, checksummed copies of the
// ClusterConfiguration on disk. A backup file is the document exactly as
// stored, preceded by a YAML comment block of metadata, so kubeadm accepts the
// file as it is (`kubeadm config validate --config FILE`).
//
// Files are written atomically (temporary file in the same directory, fsync,
// link to the final name, fsync of the directory) with mode 0600 in a 0700
// directory; a half-written file is never visible under a backup name.
package backup

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/lazyregexp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// magic is the first line of every backup file.
const magic = "# kubectl-kubeadmcfg backup v1"

// timeLayout sorts lexically in time order.
const timeLayout = "20060102T150405.000000000Z"

// namePattern matches the names Store writes: time first, so names sort by
// time; a random suffix, so concurrent backups never collide.
var namePattern = lazyregexp.New(`^(\d{8}T\d{6}\.\d{9}Z)-([a-z0-9.-]+)-rv(\d+)-([0-9a-f]{8})\.yaml$`)

// Meta is what a backup records about the document it holds.
type Meta struct {
	Server            string    `json:"server"`
	Namespace         string    `json:"namespace"`
	ConfigMap         string    `json:"configMap"`
	UID               string    `json:"uid"`
	ResourceVersion   string    `json:"resourceVersion"`
	KubernetesVersion string    `json:"kubernetesVersion"`
	APIVersion        string    `json:"apiVersion"`
	Time              time.Time `json:"time"`
	SHA256            string    `json:"sha256"`
	PluginVersion     string    `json:"pluginVersion"`
	// Reason is why the backup was taken: manual, before patch, before
	// edit, before restore, before upgrade.
	Reason string `json:"reason"`
}

// The reasons a backup is taken.
const (
	ReasonManual        = "manual"
	ReasonBeforePatch   = "before patch"
	ReasonBeforeEdit    = "before edit"
	ReasonBeforeRestore = "before restore"
	// ReasonBeforeUpgrade marks the document an upgrade's write of
	// kubeadm-config replaced (the first node's upload-config phase):
	// the cluster's configuration of the release it upgraded from.
	ReasonBeforeUpgrade = "before upgrade"
)

// header fields, in file order; sha256 is always last.
var headerKeys = []string{"server", "configmap", "uid", "resourceVersion", "kubernetesVersion", "apiVersion", "time", "pluginVersion", "reason", "sha256"}

// Backup is one backup file.
type Backup struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Size int64  `json:"size"`
	Meta
	Document []byte `json:"-"`
}

// Store is a directory of backups.
type Store struct {
	Dir string
	// Clock stamps the times written in backups, manifest backups and last
	// known good records (the real clock when nil). Which backup is newer is
	// never decided by it alone: a clock can step back.
	Clock clock.PassiveClock
}

func (s *Store) now() time.Time {
	if s.Clock == nil {
		return time.Now().UTC()
	}
	return s.Clock.Now().UTC()
}

// Write stores doc with meta as a new backup and returns it. meta.SHA256 and
// meta.Time are filled in.
func (s *Store) Write(doc []byte, meta Meta) (*Backup, error) {
	if err := s.ensureDir(); err != nil {
		return nil, err
	}
	meta.SHA256 = sum(doc)
	meta.Time = s.now()
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return nil, err
	}
	rv := meta.ResourceVersion
	if rv == "" {
		rv = "0"
	}
	name := fmt.Sprintf("%s-%s-rv%s-%s.yaml", meta.Time.Format(timeLayout), meta.ConfigMap, rv, hex.EncodeToString(suffix))
	if !namePattern().MatchString(name) {
		return nil, exitcode.Failuref("cannot name a backup of ConfigMap %q resourceVersion %q", meta.ConfigMap, meta.ResourceVersion)
	}
	content := append(encodeHeader(meta), doc...)
	final := filepath.Join(s.Dir, name)
	if err := writeAtomic(final, content, false); err != nil {
		return nil, exitcode.Failuref("write backup: %w", err)
	}
	return &Backup{Name: name, Path: final, Size: int64(len(content)), Meta: meta, Document: doc}, nil
}

func encodeHeader(m Meta) []byte {
	var b bytes.Buffer
	b.WriteString(magic + "\n")
	values := map[string]string{
		"server": m.Server, "configmap": m.Namespace + "/" + m.ConfigMap, "uid": m.UID,
		"resourceVersion": m.ResourceVersion, "kubernetesVersion": m.KubernetesVersion,
		"apiVersion": m.APIVersion, "time": m.Time.Format(time.RFC3339Nano), "pluginVersion": m.PluginVersion,
		"reason": m.Reason, "sha256": m.SHA256,
	}
	for _, k := range headerKeys {
		fmt.Fprintf(&b, "# %s: %s\n", k, oneLine(values[k]))
	}
	return b.Bytes()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// List returns the store's backups in the order of the times in their
// names, as the clocks of the hosts that took them tell it: for display.
// Which of one ConfigMap's backups is newer is decided by resourceVersion
// (Latest, Prune). Files that do not carry a backup name are ignored; files
// that do are listed even when damaged, with Read's verdict left to Verify.
func (s *Store) List() ([]string, error) {
	return s.names(namePattern, "backups")
}

// Read opens one backup by name, checking the directory and the file as
// the store does for every read (see trust.go), and that its header parses.
// It does not check the checksum, which is no authentication anyway.
func (s *Store) Read(name string) (*Backup, error) {
	data, path, size, err := s.readFile(name, "backup", namePattern)
	if err != nil {
		return nil, err
	}
	b, err := parse(data)
	if err != nil {
		return nil, exitcode.Invalidf("backup %s: %w", name, err)
	}
	b.Name, b.Path, b.Size = name, path, size
	return b, nil
}

func parse(data []byte) (*Backup, error) {
	r := bufio.NewReader(bytes.NewReader(data))
	first, err := r.ReadString('\n')
	if err != nil || strings.TrimSuffix(first, "\n") != magic {
		return nil, errors.New("no backup header (not written by kubectl-kubeadmcfg, or truncated)")
	}
	values := map[string]string{}
	offset := len(first)
	for _, key := range headerKeys {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, errors.New("truncated header")
		}
		offset += len(line)
		k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSuffix(line, "\n"), "# "), ": ")
		if !ok || k != key {
			return nil, fmt.Errorf("damaged header: want %q, got %q", key, strings.TrimSpace(line))
		}
		values[k] = v
	}
	ns, cm, _ := strings.Cut(values["configmap"], "/")
	t, err := time.Parse(time.RFC3339Nano, values["time"])
	if err != nil {
		return nil, fmt.Errorf("damaged header: time %q", values["time"])
	}
	return &Backup{
		Meta: Meta{
			Server: values["server"], Namespace: ns, ConfigMap: cm, UID: values["uid"],
			ResourceVersion: values["resourceVersion"], KubernetesVersion: values["kubernetesVersion"],
			APIVersion: values["apiVersion"], Time: t, SHA256: values["sha256"], PluginVersion: values["pluginVersion"],
			Reason: values["reason"],
		},
		Document: data[offset:],
	}, nil
}

// Verify checks a backup: its checksum, and that its document is a valid
// ClusterConfiguration. It returns every problem found.
func (b *Backup) Verify(opts clusterconfig.ValidateOptions) []string {
	var problems []string
	if !b.ChecksumOK() {
		problems = append(problems, fmt.Sprintf("checksum mismatch: the header says %s, the document hashes to %s", b.SHA256, sum(b.Document)))
		return problems
	}
	report := clusterconfig.Validate(b.Document, opts)
	problems = append(problems, report.Errors...)
	return problems
}

// ChecksumOK reports whether the document still hashes to the recorded sum.
func (b *Backup) ChecksumOK() bool { return sum(b.Document) == b.SHA256 }

// sum is the hex sha256 of a document, as headers record it.
func sum(doc []byte) string {
	s := sha256.Sum256(doc)
	return hex.EncodeToString(s[:])
}
