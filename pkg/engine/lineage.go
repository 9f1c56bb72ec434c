package engine

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
)

// What a document replaced. Every write the engine makes of a document
// (Target.Key) stamps, in the same compare-and-swap write, the hash of the
// document written and of the document it replaced: whoever reads the
// ConfigMap later can tell which document the live one replaced, as long
// as the plugin wrote it last. A write by anyone else (kubectl edit,
// kubeadm upload-config) leaves the annotations as they were, disagreeing
// with the document, and what it replaced is then unknown. A rollout
// started from the live document takes its previous document from it.

// DocumentHashAnnotation is the hash (clusterconfig.Hash) of the document
// the engine last wrote; ReplacedHashAnnotation that of the document the
// write replaced (absent when there was none).
const (
	DocumentHashAnnotation = "kubeadmcfg.io/document-hash"
	ReplacedHashAnnotation = "kubeadmcfg.io/replaced-hash"
)

// stampReplaced records, on work, what its document replaced in current,
// when the write changes the document.
func (e *Engine) stampReplaced(current, work *corev1.ConfigMap) {
	key := e.target.Key
	if key == "" {
		return
	}
	doc, ok := work.Data[key]
	old, had := current.Data[key]
	if !ok || had && old == doc {
		return
	}
	if work.Annotations == nil {
		work.Annotations = map[string]string{}
	}
	work.Annotations[DocumentHashAnnotation] = clusterconfig.Hash([]byte(doc))
	if had {
		work.Annotations[ReplacedHashAnnotation] = clusterconfig.Hash([]byte(old))
	} else {
		delete(work.Annotations, ReplacedHashAnnotation)
	}
}

// Replaced says which document the live document of cm replaced: the hash
// the engine stamped, empty when it replaced none. ok is false when that is
// unknown: the document was last written by someone else than the engine
// (its stamped hash is not the document's), or never by it.
func Replaced(cm *corev1.ConfigMap, t Target) (hash string, ok bool) {
	doc, found := cm.Data[t.Key]
	stamped, stampedOK := cm.Annotations[DocumentHashAnnotation]
	if !found || !stampedOK || stamped != clusterconfig.Hash([]byte(doc)) {
		return "", false
	}
	return cm.Annotations[ReplacedHashAnnotation], true
}
