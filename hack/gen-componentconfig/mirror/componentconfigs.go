package mirror

import (
	"reflect"

	logsapi "k8s.io/component-base/logs/api/v1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// ComponentConfigTarget is where the plugin's component config mirrors live,
// from the repository root.
const ComponentConfigTarget = "pkg/clusterconfig/internal/componentconfig/types_generated.go"

// ComponentConfigs mirrors the component configs a kubeadm config file may
// hold, for pkg/clusterconfig to decode them strictly without linking
// k8s.io/kubelet, k8s.io/kube-proxy and k8s.io/component-base (whose package
// initialisation, prometheus included, every run of the plugin would pay).
// apimachinery and k8s.io/api, which the plugin links anyway, are kept.
func ComponentConfigs() Config {
	return Config{
		Generator: "hack/gen-componentconfig",
		Package:   "componentconfig",
		Doc: `Mirrors of the component configs kubeadm reads from a config file, made by
reflection from the types of the k8s.io/kubelet, k8s.io/kube-proxy and
k8s.io/component-base versions in go.mod: same fields, order, embedding and
json tags. Run 'make generate' after changing those versions.`,
		Roots: []reflect.Type{
			reflect.TypeFor[kubeletv1beta1.KubeletConfiguration](),
			reflect.TypeFor[kubeproxyv1alpha1.KubeProxyConfiguration](),
		},
		Mirror: []string{"k8s.io/kubelet", "k8s.io/kube-proxy", "k8s.io/component-base"},
		Keep:   []string{"k8s.io/apimachinery", "k8s.io/api"},
		// flushFrequency takes a number of nanoseconds or a duration string:
		// timeormetaduration.go copies its UnmarshalJSON.
		HandWritten: []reflect.Type{reflect.TypeFor[logsapi.TimeOrMetaDuration]()},
	}
}
