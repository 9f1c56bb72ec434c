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
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// magic is the first line of every backup file.
const magic = "# kubectl-kubeadmcfg backup v1"

// timeLayout sorts lexically in time order.
const timeLayout = "20060102T150405.000000000Z"

// namePattern matches the names Store writes: time first, so names sort by
// time; a random suffix, so concurrent backups never collide.
var namePattern = regexp.MustCompile(`^(\d{8}T\d{6}\.\d{9}Z)-([a-z0-9.-]+)-rv(\d+)-([0-9a-f]{8})\.yaml$`)

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
	// edit, before restore.
	Reason string `json:"reason"`
}

// The reasons a backup is taken.
const (
	ReasonManual        = "manual"
	ReasonBeforePatch   = "before patch"
	ReasonBeforeEdit    = "before edit"
	ReasonBeforeRestore = "before restore"
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
}

// DefaultDir is where backups go without --backup-dir: $KUBEADMCFG_BACKUP_DIR,
// else /etc/kubernetes/kubeadmcfg/backups for root (beside kubeadm's own
// files), else $XDG_STATE_HOME/kubeadmcfg/backups (default ~/.local/state).
func DefaultDir() string {
	if d := os.Getenv("KUBEADMCFG_BACKUP_DIR"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/etc/kubernetes/kubeadmcfg/backups"
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "kubeadmcfg", "backups")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "kubeadmcfg", "backups")
	}
	return filepath.Join(home, ".local", "state", "kubeadmcfg", "backups")
}

// ensureDir creates the directory 0700 and refuses a symlink, so backups
// cannot be redirected elsewhere.
func (s *Store) ensureDir() error {
	if err := s.checkDir(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return exitcode.Failuref("cannot create the backup directory: %w", err)
	}
	return s.checkDir()
}

func (s *Store) checkDir() error {
	fi, err := os.Lstat(s.Dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return exitcode.Failuref("backup directory: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return exitcode.Usagef("refusing backup directory %s: it is a symlink (give its real path)", s.Dir)
	}
	if !fi.IsDir() {
		return exitcode.Usagef("backup directory %s is not a directory", s.Dir)
	}
	return nil
}

// Write stores doc with meta as a new backup and returns it. meta.SHA256 and
// meta.Time are filled in.
func (s *Store) Write(doc []byte, meta Meta) (*Backup, error) {
	if err := s.ensureDir(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(doc)
	meta.SHA256 = hex.EncodeToString(sum[:])
	meta.Time = time.Now().UTC()
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return nil, err
	}
	rv := meta.ResourceVersion
	if rv == "" {
		rv = "0"
	}
	name := fmt.Sprintf("%s-%s-rv%s-%s.yaml", meta.Time.Format(timeLayout), meta.ConfigMap, rv, hex.EncodeToString(suffix))
	if !namePattern.MatchString(name) {
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

// writeAtomic writes content to a temporary file beside final, syncs it,
// puts it in place and syncs the directory, so final is either absent, the
// old file or the whole new one. A backup is linked into place, which fails
// rather than replace a file; other files are renamed over the old one.
func writeAtomic(final string, content []byte, replace bool) error {
	dir := filepath.Dir(final)
	tmp, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(final)+"-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := errors.Join(tmp.Chmod(0o600), writeAll(tmp, content), tmp.Sync(), tmp.Close()); err != nil {
		return err
	}
	if replace {
		err = os.Rename(tmp.Name(), final)
	} else {
		err = os.Link(tmp.Name(), final)
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// WriteFile writes data to path atomically with mode 0600, replacing it: the
// on-disk copies of --write-config and restore --to-file.
func WriteFile(path string, data []byte) error {
	if err := writeAtomic(path, data, true); err != nil {
		return exitcode.Failuref("write %s: %w", path, err)
	}
	return nil
}

func writeAll(f *os.File, data []byte) error {
	_, err := f.Write(data)
	return err
}

// List returns the store's backups, oldest first. Files that do not carry a
// backup name are ignored; files that do are listed even when damaged, with
// Read's verdict left to Verify.
func (s *Store) List() ([]string, error) {
	if err := s.checkDir(); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, exitcode.Failuref("list backups: %w", err)
	}
	var names []string
	for _, e := range entries {
		if namePattern.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// Read opens one backup by name, checking that it is a regular file (not a
// symlink) and that its header parses. It does not check the checksum.
func (s *Store) Read(name string) (*Backup, error) {
	if name != filepath.Base(name) || !namePattern.MatchString(name) {
		return nil, exitcode.Usagef("%q is not a backup name (see 'kubectl kubeadmcfg backup list')", name)
	}
	path := filepath.Join(s.Dir, name)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, exitcode.NotFoundf("backup %s not found in %s", name, s.Dir)
	}
	if err != nil {
		return nil, exitcode.Failuref("read backup: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, exitcode.Invalidf("backup %s is not a regular file (a symlink or other entry is never trusted)", name)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, exitcode.Failuref("read backup: %w", err)
	}
	b, err := parse(data)
	if err != nil {
		return nil, exitcode.Invalidf("backup %s: %w", name, err)
	}
	b.Name, b.Path, b.Size = name, path, fi.Size()
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
		sum := sha256.Sum256(b.Document)
		problems = append(problems, fmt.Sprintf("checksum mismatch: the header says %s, the document hashes to %s", b.SHA256, hex.EncodeToString(sum[:])))
		return problems
	}
	report := clusterconfig.Validate(b.Document, opts)
	problems = append(problems, report.Errors...)
	return problems
}

// Prune removes the oldest backups of the store beyond keep. Only files
// with a backup name and a backup header are ever removed.
func (s *Store) Prune(keep int) ([]string, error) { return s.PruneConfigMap(keep, "") }

// PruneConfigMap is Prune counting only the backups of one ConfigMap name
// (all of them when configMap is empty), so writes to one ConfigMap never
// push out another's backups.
func (s *Store) PruneConfigMap(keep int, configMap string) ([]string, error) {
	all, err := s.List()
	if configMap != "" {
		all = slices.DeleteFunc(all, func(name string) bool { return namePattern.FindStringSubmatch(name)[2] != configMap })
	}
	if err != nil || len(all) <= keep {
		return nil, err // nothing to do: skip reading every file's header
	}
	names := slices.DeleteFunc(all, func(name string) bool { return !s.isOurs(name) })
	if len(names) <= keep {
		return nil, nil
	}
	var removed []string
	for _, name := range names[:len(names)-keep] {
		err := os.Remove(filepath.Join(s.Dir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, exitcode.Failuref("prune backups: %w", err)
		}
		removed = append(removed, name)
	}
	return removed, nil
}

// isOurs reports whether name is a regular file that starts with the backup
// header.
func (s *Store) isOurs(name string) bool {
	path := filepath.Join(s.Dir, name)
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(magic))
	_, err = f.Read(head)
	return err == nil && string(head) == magic
}

// ChecksumOK reports whether the document still hashes to the recorded sum.
func (b *Backup) ChecksumOK() bool {
	sum := sha256.Sum256(b.Document)
	return hex.EncodeToString(sum[:]) == b.SHA256
}

// Latest returns the newest backup of ConfigMap namespace/name, leaving out
// the ones a restore took of the document it replaced: restoring "the
// latest" twice must not flip back to what the first restore undid.
func (s *Store) Latest(namespace, name string) (*Backup, error) {
	names, err := s.List()
	if err != nil {
		return nil, err
	}
	for i := len(names) - 1; i >= 0; i-- {
		if m := namePattern.FindStringSubmatch(names[i]); m == nil || m[2] != name {
			continue
		}
		b, err := s.Read(names[i])
		if err != nil {
			return nil, err // the newest is damaged: never fall back silently
		}
		if b.Namespace == namespace && b.ConfigMap == name && b.Reason != ReasonBeforeRestore {
			return b, nil
		}
	}
	return nil, exitcode.NotFoundf("no backup of configmap %s/%s in %s", namespace, name, s.Dir)
}
