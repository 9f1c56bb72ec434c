package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pod reads one Pod, or returns nil when there is none. reconfigure reads
// the mirror Pods the kubelet publishes for a node's static Pods with it:
// their kubernetes.io/config.hash says which manifest the kubelet runs, and
// their status whether it keeps crashing. It is read-only, like every read
// outside the write pipeline.
func (e *Engine) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pod, err := e.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, APIError(err, "get", fmt.Sprintf("pod %s/%s", namespace, name))
	}
	return pod, nil
}
