package testcluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// What a component may write, and anything under /etc/kubernetes, is the
// node's; a read-only system path stays the host's.
func TestMapPaths(t *testing.T) {
	hostPath := func(name, path string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{hostPath("data", "/srv/etcd"), hostPath("certs", "/etc/kubernetes/pki"), hostPath("ca", "/etc/ssl/certs")},
		Containers: []corev1.Container{{VolumeMounts: []corev1.VolumeMount{
			{Name: "data", MountPath: "/var/lib/etcd"},
			{Name: "certs", MountPath: "/etc/kubernetes/pki", ReadOnly: true},
			{Name: "ca", MountPath: "/etc/ssl/certs", ReadOnly: true},
		}}},
	}}
	args := []string{"--data-dir=/var/lib/etcd", "--cert-file=/etc/kubernetes/pki/etcd/server.crt",
		"--ca=/etc/ssl/certs/ca.pem", "--other=/var/lib/etcd-other", "/var/lib/etcd/x"}
	want := []string{"--data-dir=/node/srv/etcd", "--cert-file=/node/etc/kubernetes/pki/etcd/server.crt",
		"--ca=/etc/ssl/certs/ca.pem", "--other=/var/lib/etcd-other", "/node/srv/etcd/x"}
	if diff := cmp.Diff(want, mapPaths("/node", pod, args)); diff != "" {
		t.Errorf("mapped (-want +got):\n%s", diff)
	}
}
