package backup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/lazyregexp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/version"
)

// Static Pod manifests that reconfigure replaced, kept beside the
// ClusterConfiguration backups. A manifest backup belongs to the backup of
// the ClusterConfiguration the run applied: its name starts with that
// backup's, and pruning that backup removes it too. The file is the manifest
// as it was on disk, after a block of YAML comments, so it can be copied back
// into the manifests directory as it is.

// manifestMagic is the first line of every manifest backup.
const manifestMagic = "# kubectl-kubeadmcfg manifest backup v1"

// manifestPattern matches manifest backup names: the ClusterConfiguration
// backup's name without ".yaml", the time, the node and the Pod's name.
var manifestPattern = lazyregexp.New(`^(\d{8}T\d{6}\.\d{9}Z-[a-z0-9.-]+-rv\d+-[0-9a-f]{8})\.(\d{8}T\d{6}\.\d{9}Z)\.([a-z0-9.-]+)\.([a-z0-9-]+)\.manifest$`)

// manifestHeaderKeys are the header fields, in file order; sha256 is last.
var manifestHeaderKeys = []string{"node", "component", "path", "configBackup", "time", "pluginVersion", "sha256"}

// ManifestMeta is what a manifest backup records.
type ManifestMeta struct {
	// Node is the node whose manifest this was.
	Node string `json:"node"`
	// Component is the static Pod's name, such as kube-apiserver.
	Component string `json:"component"`
	// Path is where the manifest was.
	Path string `json:"path"`
	// ConfigBackup is the ClusterConfiguration backup of the run that
	// replaced the manifest.
	ConfigBackup  string    `json:"configBackup"`
	Time          time.Time `json:"time"`
	SHA256        string    `json:"sha256"`
	PluginVersion string    `json:"pluginVersion"`
}

// ManifestBackup is one manifest backup file.
type ManifestBackup struct {
	Name string `json:"name"`
	Path string `json:"path"`
	ManifestMeta
	Manifest []byte `json:"-"`
}

// WriteManifest stores manifest, replaced by the run that applied the
// ClusterConfiguration backup meta.ConfigBackup, as a new manifest backup.
// meta.Time, meta.SHA256 and meta.PluginVersion are filled in.
func (s *Store) WriteManifest(manifest []byte, meta ManifestMeta) (*ManifestBackup, error) {
	if !namePattern().MatchString(meta.ConfigBackup) {
		return nil, exitcode.Failuref("cannot back up a manifest for %q: not a backup name", meta.ConfigBackup)
	}
	if err := s.ensureDir(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(manifest)
	meta.SHA256, meta.Time, meta.PluginVersion = hex.EncodeToString(sum[:]), s.now(), version.Version
	name := fmt.Sprintf("%s.%s.%s.%s.manifest", strings.TrimSuffix(meta.ConfigBackup, ".yaml"),
		meta.Time.Format(timeLayout), meta.Node, meta.Component)
	if !manifestPattern().MatchString(name) {
		return nil, exitcode.Failuref("cannot name a backup of the %s manifest of node %q", meta.Component, meta.Node)
	}
	values := map[string]string{
		"node": meta.Node, "component": meta.Component, "path": meta.Path, "configBackup": meta.ConfigBackup,
		"time": meta.Time.Format(time.RFC3339Nano), "pluginVersion": meta.PluginVersion, "sha256": meta.SHA256,
	}
	var b bytes.Buffer
	b.WriteString(manifestMagic + "\n")
	for _, k := range manifestHeaderKeys {
		fmt.Fprintf(&b, "# %s: %s\n", k, oneLine(values[k]))
	}
	b.Write(manifest)
	path := filepath.Join(s.Dir, name)
	if err := writeAtomic(path, b.Bytes(), false); err != nil {
		return nil, exitcode.Failuref("write manifest backup: %w", err)
	}
	return &ManifestBackup{Name: name, Path: path, ManifestMeta: meta, Manifest: manifest}, nil
}

// ReadManifest opens one manifest backup by name. Like Read, it refuses
// anything but a regular file and leaves the checksum to ChecksumOK.
func (s *Store) ReadManifest(name string) (*ManifestBackup, error) {
	data, path, _, err := s.readFile(name, "manifest backup", manifestPattern)
	if err != nil {
		return nil, err
	}
	r := bufio.NewReader(bytes.NewReader(data))
	first, err := r.ReadString('\n')
	if err != nil || strings.TrimSuffix(first, "\n") != manifestMagic {
		return nil, exitcode.Invalidf("manifest backup %s: no header (truncated, or not written by kubectl-kubeadmcfg)", name)
	}
	offset, values := len(first), map[string]string{}
	for _, key := range manifestHeaderKeys {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, exitcode.Invalidf("manifest backup %s: truncated header", name)
		}
		offset += len(line)
		k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSuffix(line, "\n"), "# "), ": ")
		if !ok || k != key {
			return nil, exitcode.Invalidf("manifest backup %s: damaged header: want %q, got %q", name, key, strings.TrimSpace(line))
		}
		values[k] = v
	}
	t, err := time.Parse(time.RFC3339Nano, values["time"])
	if err != nil {
		return nil, exitcode.Invalidf("manifest backup %s: damaged header: time %q", name, values["time"])
	}
	return &ManifestBackup{Name: name, Path: path, Manifest: data[offset:], ManifestMeta: ManifestMeta{
		Node: values["node"], Component: values["component"], Path: values["path"], ConfigBackup: values["configBackup"],
		Time: t, SHA256: values["sha256"], PluginVersion: values["pluginVersion"],
	}}, nil
}

// ChecksumOK reports whether the manifest still hashes to the recorded sum.
func (m *ManifestBackup) ChecksumOK() bool {
	sum := sha256.Sum256(m.Manifest)
	return hex.EncodeToString(sum[:]) == m.SHA256
}

// Manifests lists the manifest backups that belong to the ClusterConfiguration
// backup configBackup, oldest first.
func (s *Store) Manifests(configBackup string) ([]string, error) {
	all, err := s.manifestNames()
	if err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(configBackup, ".yaml")
	return slices.DeleteFunc(all, func(name string) bool { return manifestPattern().FindStringSubmatch(name)[1] != base }), nil
}

func (s *Store) manifestNames() ([]string, error) {
	return s.names(manifestPattern, "manifest backups")
}

// pruneManifestsOf removes the manifest backups of the ClusterConfiguration
// backups just pruned, so they go together. Only regular files that start
// with the manifest backup header are removed.
func (s *Store) pruneManifestsOf(removed []string) []string {
	if len(removed) == 0 {
		return nil
	}
	gone := map[string]bool{}
	for _, name := range removed {
		gone[strings.TrimSuffix(name, ".yaml")] = true
	}
	names, _ := s.manifestNames()
	var out []string
	for _, name := range names {
		if !gone[manifestPattern().FindStringSubmatch(name)[1]] || !s.startsWith(name, manifestMagic) {
			continue
		}
		if err := os.Remove(filepath.Join(s.Dir, name)); err == nil {
			out = append(out, name)
		}
	}
	return out
}

// startsWith reports whether name is a file the store trusts that starts
// with head.
func (s *Store) startsWith(name, head string) bool {
	f, _, err := s.open(name, "manifest backup")
	if err != nil {
		return false
	}
	defer f.Close()
	buf := make([]byte, len(head))
	_, err = f.Read(buf)
	return err == nil && string(buf) == head
}
