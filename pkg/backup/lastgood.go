package backup

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/lazyregexp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// ReasonReconfigure marks the backup of a ClusterConfiguration that
// reconfigure applied to a node. It records what a node was given, not what
// a write replaced, so restore --latest passes over it.
const ReasonReconfigure = "applied by reconfigure"

// LastGood records which ClusterConfiguration backup a node's control plane
// last came up healthy on. reconfigure writes it only after every component
// it changed was healthy, so a failed or rolled-back run never moves it, and
// `reconfigure --latest-good` applies exactly that backup again.
type LastGood struct {
	Node      string    `json:"node"`
	Namespace string    `json:"namespace"`
	ConfigMap string    `json:"configMap"`
	Backup    string    `json:"backup"`
	SHA256    string    `json:"sha256"`
	Time      time.Time `json:"time"`
}

// lastGoodPattern matches the marker files: one per ConfigMap and node.
var lastGoodPattern = lazyregexp.New(`^last-known-good--([a-z0-9.-]+)--([a-z0-9.-]+)--([a-z0-9.-]+)\.json$`)

func lastGoodName(namespace, configMap, node string) (string, error) {
	name := fmt.Sprintf("last-known-good--%s--%s--%s.json", namespace, configMap, node)
	if !lastGoodPattern().MatchString(name) || strings.Contains(namespace+configMap+node, "--") {
		return "", exitcode.Usagef("cannot record a last known good for node %q of configmap %s/%s", node, namespace, configMap)
	}
	return name, nil
}

// MarkLastGood records b as the last known good configuration of node.
func (s *Store) MarkLastGood(b *Backup, node string) error {
	name, err := lastGoodName(b.Namespace, b.ConfigMap, node)
	if err != nil {
		return err
	}
	if err := s.ensureDir(); err != nil {
		return err
	}
	data, err := json.MarshalIndent(LastGood{Node: node, Namespace: b.Namespace, ConfigMap: b.ConfigMap,
		Backup: b.Name, SHA256: b.SHA256, Time: s.now()}, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(s.Dir, name), append(data, '\n'), true); err != nil {
		return exitcode.Failuref("record the last known good: %w", err)
	}
	return nil
}

// LastGood returns the backup last marked good for node, after checking
// that it is still the same file (its recorded sha256) and intact.
func (s *Store) LastGood(namespace, configMap, node string) (*Backup, error) {
	name, err := lastGoodName(namespace, configMap, node)
	if err != nil {
		return nil, err
	}
	mark, err := s.readLastGood(name)
	if exitcode.FromError(err) == exitcode.NotFound {
		return nil, exitcode.NotFoundf("no last known good configuration of node %s for configmap %s/%s in %s", node, namespace, configMap, s.Dir)
	}
	if err != nil {
		return nil, err
	}
	b, err := s.Read(mark.Backup)
	if err != nil {
		return nil, err
	}
	if b.SHA256 != mark.SHA256 || !b.ChecksumOK() {
		return nil, exitcode.Invalidf("backup %s, the last known good of node %s, is not the file that was marked (checksum differs)", b.Name, node)
	}
	return b, nil
}

// LastGoods returns every last known good recorded in the store.
func (s *Store) LastGoods() ([]LastGood, error) {
	names, err := s.names(lastGoodPattern, "last known good records")
	if err != nil {
		return nil, err
	}
	var out []LastGood
	for _, name := range names {
		mark, err := s.readLastGood(name)
		if err != nil {
			return nil, err
		}
		out = append(out, *mark)
	}
	return out, nil
}

func (s *Store) readLastGood(name string) (*LastGood, error) {
	data, _, _, err := s.readFile(name, "last known good record", lastGoodPattern)
	if err != nil {
		return nil, err
	}
	var mark LastGood
	if err := json.Unmarshal(data, &mark); err != nil || !namePattern().MatchString(mark.Backup) {
		return nil, exitcode.Invalidf("%s is damaged", name)
	}
	return &mark, nil
}

// lastGoodBackups is the set of backups some node's last known good names:
// pruning keeps them, however old.
func (s *Store) lastGoodBackups() map[string]bool {
	marks, _ := s.LastGoods()
	out := map[string]bool{}
	for _, m := range marks {
		out[m.Backup] = true
	}
	return out
}
