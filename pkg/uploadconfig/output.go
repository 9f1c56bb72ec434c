package uploadconfig

import (
	"bufio"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
)

// What kubeadm 1.37 prints on its standard output in a dry run of `upgrade
// apply phase upload-config kubeadm` with apply.printConfig set (k/k
// cmd/kubeadm/app): its dry-run client logs every GET it passes on to the
// cluster, with the object the cluster answered (util/apiclient/dryrun.go,
// LogAction and LogObject); the upgrade's data, built before any phase runs,
// prints the ClusterConfiguration it holds, one line per line of YAML
// behind a tab (cmd/upgrade/common.go, printConfiguration); and the phase
// says it would upload it (cmd/phases/upgrade/apply/uploadconfig.go).
const (
	getConfigMapLine  = `[dryrun] Would perform action GET on resource "configmaps" in API group "core/v1"`
	kubeadmConfigLine = `[dryrun] Resource name "kubeadm-config", namespace "kube-system"`
	attachedLine      = `[dryrun] Attached object:`
	configUsedLine    = `[upgrade/config] Configuration used:`
	wouldUploadLine   = `[dryrun] Would upload the kubeadm ClusterConfiguration to a ConfigMap`
	// storingPrefix starts the line kubeadm prints when it writes
	// kubeadm-config for real (phases/uploadconfig/uploadconfig.go).
	storingPrefix = `[upload-config] Storing the configuration used in ConfigMap`
)

// clusterConfigurationKey is the key of kube-system/kubeadm-config that
// kubeadm reads and writes (constants.ClusterConfigurationConfigMapKey).
const clusterConfigurationKey = "ClusterConfiguration"

// maxPrintedLine is the longest line kubeadm prints of its configuration:
// it prints it through a bufio.Scanner, whose default limit stops the
// printing, without an error, at the first line that long.
const maxPrintedLine = bufio.MaxScanTokenSize - 1

// parseDryRun reads what kubeadm's dry run printed on its standard output:
// the kubeadm-config it read, and the ClusterConfiguration it would write.
func parseDryRun(out string) (*Upload, error) {
	lines := strings.SplitAfter(out, "\n")
	line := func(i int) string {
		if i >= len(lines) {
			return ""
		}
		return strings.TrimSuffix(lines[i], "\n")
	}
	var (
		reads           []*corev1.ConfigMap
		written         *string
		wouldUpload     bool
		wroteForReal    bool
		configUsedCount int
	)
	for i := 0; i < len(lines); i++ {
		switch l := line(i); {
		case l == getConfigMapLine && line(i+1) == kubeadmConfigLine:
			if line(i+2) != attachedLine {
				return nil, outputErrorf("kubeadm read kubeadm-config but printed no copy of it (%q after its GET)", line(i+2))
			}
			// The object is YAML, every line of which is indented or starts
			// with a ConfigMap's own key; the next line kubeadm prints starts
			// with "[". LogObject prints it with Println: one newline more.
			j := i + 3
			var obj strings.Builder
			for ; j < len(lines) && !strings.HasPrefix(lines[j], "["); j++ {
				obj.WriteString(lines[j])
			}
			cm := &corev1.ConfigMap{}
			if err := input.Unmarshal([]byte(strings.TrimSuffix(obj.String(), "\n")), cm); err != nil {
				return nil, outputErrorf("the copy of kubeadm-config kubeadm printed is not a ConfigMap: %v", err)
			}
			reads = append(reads, cm)
			i = j - 1
		case l == configUsedLine:
			configUsedCount++
			var doc strings.Builder
			j := i + 1
			for ; j < len(lines) && strings.HasPrefix(lines[j], "\t"); j++ {
				doc.WriteString(strings.TrimPrefix(strings.TrimSuffix(lines[j], "\n"), "\t"))
				doc.WriteByte('\n')
			}
			s := doc.String()
			written = &s
			i = j - 1
		case l == wouldUploadLine:
			wouldUpload = true
		case strings.HasPrefix(l, storingPrefix):
			wroteForReal = true
		}
	}
	switch {
	case wroteForReal:
		return nil, outputErrorf("kubeadm did not run dry: it wrote kubeadm-config itself")
	case len(reads) == 0:
		return nil, outputErrorf("kubeadm printed no copy of the kubeadm-config it read (is it a kubeadm of 1.31 or later, whose dry run reads the cluster?)")
	case configUsedCount == 0:
		return nil, outputErrorf("kubeadm printed no %q block (does it honour apply.printConfig?)", configUsedLine)
	case configUsedCount > 1:
		return nil, outputErrorf("kubeadm printed its configuration %d times", configUsedCount)
	case !wouldUpload:
		return nil, outputErrorf("kubeadm did not say %q: the phase did not run", wouldUploadLine)
	}
	read := reads[0]
	for _, other := range reads[1:] {
		if other.ResourceVersion != read.ResourceVersion || other.Data[clusterConfigurationKey] != read.Data[clusterConfigurationKey] {
			return nil, outputErrorf("kubeadm read kubeadm-config twice, resourceVersion %s and %s, and did not say which copy it would write from",
				read.ResourceVersion, other.ResourceVersion)
		}
	}
	doc, ok := read.Data[clusterConfigurationKey]
	if !ok {
		return nil, outputErrorf("the kubeadm-config kubeadm read has no key %q", clusterConfigurationKey)
	}
	up := &Upload{Read: []byte(doc), ResourceVersion: read.ResourceVersion, Written: []byte(*written)}
	if err := up.checkPrintable(); err != nil {
		return nil, err
	}
	return up, nil
}

// checkPrintable refuses a document read with a line that kubeadm's print
// of its configuration would cut: everything after it would be missing
// from what it says it would write. kubeadm writes what it read with a few
// fields changed, in the same layout as the plugin's (keys sorted,
// two-space indent), so the document read is measured in that layout.
func (u *Upload) checkPrintable() error {
	read, err := clusterconfig.Parse(u.Read)
	if err != nil {
		return fmt.Errorf("the ClusterConfiguration kubeadm read: %w", err)
	}
	data, err := read.Marshal()
	if err != nil {
		return fmt.Errorf("the ClusterConfiguration kubeadm read: %w", err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if len(l) >= maxPrintedLine {
			return outputErrorf("the ClusterConfiguration has a line of %d bytes, and kubeadm prints its configuration only up to a line of %d", len(l), maxPrintedLine)
		}
	}
	return nil
}

// OutputError is a dry run of kubeadm that succeeded but did not say what
// kubeadm would write.
type OutputError struct {
	Reason string
}

func (e *OutputError) Error() string {
	return "kubeadm's dry run of upload-config kubeadm did not say what it would write: " + e.Reason
}

func outputErrorf(format string, a ...any) error {
	return &OutputError{Reason: fmt.Sprintf(format, a...)}
}
