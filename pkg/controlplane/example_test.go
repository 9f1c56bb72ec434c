package controlplane_test

import (
	"bytes"
	"fmt"
	"os"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
)

// What a reconfiguration would change on a node: the running manifests
// (here kubeadm's, in testdata) against rendered ones, component by
// component, with the probe each is checked with. Apply then carries the
// plan out; Renderer renders with the real kubeadm.
func ExampleNewPlan() {
	rendered := map[controlplane.Component][]byte{}
	for _, c := range controlplane.Components() {
		data, err := os.ReadFile("testdata/" + c.File())
		if err != nil {
			panic(err)
		}
		rendered[c] = data
	}
	rendered[controlplane.Scheduler] = bytes.Replace(rendered[controlplane.Scheduler],
		[]byte("--leader-elect=true"), []byte("--leader-elect=false"), 1)
	plan, err := controlplane.NewPlan("testdata", rendered, controlplane.Components())
	if err != nil {
		panic(err)
	}
	for _, ch := range plan.Changes {
		probe, _ := ch.Rendered.Probe()
		fmt.Println(ch.Component.PodName(), ch.Changed(), probe.URL(), ch.Current.MirrorPodName("cp-1"))
	}
	// Output:
	// kube-apiserver false https://192.0.2.11:6443/livez kube-apiserver-cp-1
	// kube-controller-manager false https://127.0.0.1:10257/healthz kube-controller-manager-cp-1
	// kube-scheduler true https://127.0.0.1:10259/livez kube-scheduler-cp-1
}
