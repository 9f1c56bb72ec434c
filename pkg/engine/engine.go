// Package engine is the one place the plugin reads and writes ConfigMaps.
// Every write is read, apply the caller's edit to that fresh copy, check,
// compare-and-swap on resourceVersion; on a conflict the edit is applied again
// to the new copy, never resent from an old snapshot.
package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// DefaultKey is the ConfigMap key kubeadm stores the ClusterConfiguration in.
const DefaultKey = "ClusterConfiguration"

// Target names a ConfigMap and, for documents, the key that holds one.
type Target struct {
	Namespace string
	Name      string
	Key       string
}

// String names the ConfigMap the way messages show it.
func (t Target) String() string { return fmt.Sprintf("configmap %s/%s", t.Namespace, t.Name) }

// Get reads the ConfigMap.
func Get(ctx context.Context, client corev1client.ConfigMapsGetter, t Target) (*corev1.ConfigMap, error) {
	cm, err := client.ConfigMaps(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	if err != nil {
		return nil, APIError(err, "get", t.String())
	}
	return cm, nil
}

// Document returns the document stored under t.Key, or a not-found error
// that says the ConfigMap exists but lacks the key.
func Document(cm *corev1.ConfigMap, t Target) (string, error) {
	doc, ok := cm.Data[t.Key]
	if !ok {
		return "", exitcode.NotFoundf("%s has no key %q (is this a kubeadm cluster?)", t, t.Key)
	}
	return doc, nil
}
