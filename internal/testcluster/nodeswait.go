package testcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Waiting for a StartNodes control plane to serve.

// waitAPI waits until every node's API server is ready.
func (n *Nodes) waitAPI(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // readiness probe
	for _, node := range n.Nodes {
		url := fmt.Sprintf("https://%s/readyz", net.JoinHostPort(node.Address, fmt.Sprint(node.BindPort)))
		for {
			resp, err := client.Get(url)
			if err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("the API server of %s is not ready: %s", node.Name, lastLines(filepath.Join(node.Root, "logs", "kube-apiserver.log"), 5))
			case <-time.After(300 * time.Millisecond):
			}
		}
	}
	return nil
}

// WaitReady waits until every node's mirror Pods are Ready: those of its
// three components, and of its etcd member when etcd is stacked.
func (n *Nodes) WaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client, err := n.Clientset()
	if err != nil {
		return err
	}
	for _, node := range n.Nodes {
		for _, c := range node.components() {
			name := c + "-" + node.Name
			for {
				pod, err := client.CoreV1().Pods("kube-system").Get(ctx, name, metav1.GetOptions{})
				if err == nil && len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].Ready {
					break
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("mirror Pod %s is not Ready (%w); logs in %s", name, errors.Join(err, ctx.Err()), filepath.Join(node.Root, "logs"))
				case <-time.After(300 * time.Millisecond):
				}
			}
		}
	}
	return nil
}

// components are the static Pods the node runs.
func (n *Node) components() []string {
	c := []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}
	if n.Etcd != nil {
		c = append(c, "etcd")
	}
	return c
}
