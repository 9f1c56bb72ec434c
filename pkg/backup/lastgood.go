package backup

import (
	"encoding/json"
	"errors"
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

// LastGoods returns every last known good recorded in the store. Damaged
// records are left out and named in the error (exit code 3), which comes
// with the records that could be read.
func (s *Store) LastGoods() ([]LastGood, error) {
	marks, damaged, err := s.lastGoods()
	if err != nil {
		return nil, err
	}
	return marks, damaged
}

// errDamaged marks a last known good record of the store that does not
// parse: it names no backup.
var errDamaged = errors.New("damaged")

// lastGoods reads every last known good record. damaged (nil when none)
// names the records that do not parse; err is the listing, or a record,
// that could not be read at all or is not trusted.
func (s *Store) lastGoods() (marks []LastGood, damaged, err error) {
	names, err := s.names(lastGoodPattern, "last known good records")
	if err != nil {
		return nil, nil, err
	}
	var broken []string
	for _, name := range names {
		mark, err := s.readLastGood(name)
		switch {
		case err == nil:
			marks = append(marks, *mark)
		case errors.Is(err, errDamaged):
			broken = append(broken, name)
		case exitcode.FromError(err) == exitcode.NotFound:
			// removed since the listing: it protects nothing now
		default:
			return nil, nil, err
		}
	}
	if len(broken) == 0 {
		return marks, nil, nil
	}
	return marks, exitcode.New(exitcode.Invalid, &DamagedError{Records: broken}), nil
}

// DamagedError names the last known good records that do not parse. Each
// protects no backup from pruning; the others still do, so Prune goes on
// and returns this error beside what it removed.
type DamagedError struct {
	Records []string
}

func (e *DamagedError) Error() string {
	if len(e.Records) == 1 {
		return fmt.Sprintf("last known good record %s is damaged and protects no backup from pruning (repair it, or remove it and run reconfigure again)", e.Records[0])
	}
	return fmt.Sprintf("last known good records %s are damaged and protect no backup from pruning (repair them, or remove them and run reconfigure again)", strings.Join(e.Records, ", "))
}

func (s *Store) readLastGood(name string) (*LastGood, error) {
	data, _, _, err := s.readFile(name, "last known good record", lastGoodPattern)
	if err != nil {
		return nil, err
	}
	var mark LastGood
	if err := json.Unmarshal(data, &mark); err != nil || !namePattern().MatchString(mark.Backup) {
		return nil, exitcode.New(exitcode.Invalid, fmt.Errorf("%s is %w", name, errDamaged))
	}
	return &mark, nil
}

// protected is the set of backups some node's last known good names:
// pruning keeps them, however old. A damaged record names no backup: it is
// left out, so that it does not cost every other node its protection, and
// reported in damaged. A record that cannot be read at all, or is not
// trusted, might name any backup: then err says that nothing may be pruned.
func (s *Store) protected() (keep map[string]bool, damaged, err error) {
	marks, damaged, err := s.lastGoods()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot tell which backups are last known good, so none is pruned: %w", err)
	}
	keep = map[string]bool{}
	for _, m := range marks {
		keep[m.Backup] = true
	}
	return keep, damaged, nil
}
