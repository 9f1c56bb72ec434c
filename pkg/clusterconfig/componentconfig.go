package clusterconfig

import (
	"fmt"

	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Component configs (KubeletConfiguration, KubeProxyConfiguration) in a
// kubeadm config file: kubeadm decodes them strictly against the component's
// own schema, and checks nothing else before it starts the component.

// newKubeletFields are KubeletConfiguration fields newer than some kubeadm
// releases the plugin knows: an older kubeadm's schema refuses them as
// unknown. The plugin's schema is the newest release's.
var newKubeletFields = map[string]int{"defaultPodSysctls": 37}

// validateComponentConfig decodes a component config strictly.
func validateComponentConfig(js []byte, kind string, rel *release, r *Report) {
	var err error
	switch kind {
	case KindKubelet:
		_, err = strictInto[kubeletv1beta1.KubeletConfiguration](js, r)
		if err == nil {
			tree, _ := decodeTree(js)
			for name, minor := range newKubeletFields {
				if _, ok := tree[name]; ok && rel.minor < minor {
					r.errorf("unknown field %q (KubeletConfiguration has it from kubeadm 1.%d on, not in kubeadm %s)", name, minor, rel)
				}
			}
		}
	case KindProxy:
		_, err = strictInto[kubeproxyv1alpha1.KubeProxyConfiguration](js, r)
	default:
		err = fmt.Errorf("unknown component config kind %s", kind)
	}
	if err != nil {
		r.errorf("%s", decodeError(err))
	}
}
