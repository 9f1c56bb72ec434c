package clusterconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/hack/gen-componentconfig/mirror"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig/internal/componentconfig"
)

// The plugin decodes component configs into generated mirrors of their types
// (internal/componentconfig), so that it links neither k8s.io/kubelet nor
// k8s.io/kube-proxy nor k8s.io/component-base. These tests, which may link
// them, hold the mirrors to the real types.

// TestComponentConfigMirrorsAreCurrent fails when the generated mirrors are
// not what the generator makes from the types of the versions in go.mod.
func TestComponentConfigMirrorsAreCurrent(t *testing.T) {
	want, err := mirror.Generate(mirror.ComponentConfigs())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join("../..", mirror.ComponentConfigTarget)
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n")); diff != "" {
		t.Errorf("%s is stale: run 'make generate' (-generated +checked in):\n%s", mirror.ComponentConfigTarget, diff)
	}
}

// decoded is what the plugin makes of a component config: its errors, and
// the value when it decoded.
type decoded struct {
	errors []string
	value  reflect.Value
}

func decodeAs[T any](js []byte) decoded {
	var r Report
	v, err := strictInto[T](js, &r)
	if err != nil {
		r.errorf("%s", decodeError(err))
		return decoded{errors: r.Errors}
	}
	return decoded{errors: r.Errors, value: reflect.ValueOf(v).Elem()}
}

// compareDecodes decodes js into the real type R and its mirror M and
// describes any difference: in the errors, or in the values decoded.
func compareDecodes[R, M any](js []byte) (decoded, string) {
	orig, mir := decodeAs[R](js), decodeAs[M](js)
	if diff := cmp.Diff(orig.errors, mir.errors); diff != "" {
		return orig, fmt.Sprintf("errors differ (-real +mirror):\n%s", diff)
	}
	if orig.value.IsValid() != mir.value.IsValid() {
		return orig, fmt.Sprintf("decoded: real %v, mirror %v", orig.value.IsValid(), mir.value.IsValid())
	}
	if orig.value.IsValid() {
		if diff := sameValue(orig.value, mir.value, ""); diff != "" {
			return orig, "values differ: " + diff
		}
	}
	return orig, ""
}

// sameValue compares a real value with its mirror field by field: kept types
// must be equal, mirrored ones alike in shape and content.
func sameValue(a, b reflect.Value, at string) string {
	if a.Type() == b.Type() {
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			return fmt.Sprintf("%s: %#v != %#v", at, a.Interface(), b.Interface())
		}
		return ""
	}
	if a.Kind() != b.Kind() {
		return fmt.Sprintf("%s: kind %s != %s", at, a.Kind(), b.Kind())
	}
	switch a.Kind() {
	case reflect.Struct:
		if a.NumField() != b.NumField() {
			return fmt.Sprintf("%s: %d fields != %d", at, a.NumField(), b.NumField())
		}
		for i := range a.NumField() {
			fa, fb := a.Type().Field(i), b.Type().Field(i)
			if fa.Name != fb.Name || fa.Tag.Get("json") != fb.Tag.Get("json") || fa.Anonymous != fb.Anonymous {
				return fmt.Sprintf("%s: field %s %q != %s %q", at, fa.Name, fa.Tag.Get("json"), fb.Name, fb.Tag.Get("json"))
			}
			if d := sameValue(a.Field(i), b.Field(i), at+"."+fa.Name); d != "" {
				return d
			}
		}
	case reflect.Pointer:
		if a.IsNil() != b.IsNil() {
			return fmt.Sprintf("%s: nil %v != %v", at, a.IsNil(), b.IsNil())
		}
		if !a.IsNil() {
			return sameValue(a.Elem(), b.Elem(), at)
		}
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() || (a.Kind() == reflect.Slice && a.IsNil() != b.IsNil()) {
			return fmt.Sprintf("%s: length %d != %d", at, a.Len(), b.Len())
		}
		for i := range a.Len() {
			if d := sameValue(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", at, i)); d != "" {
				return d
			}
		}
	case reflect.Map:
		if a.Len() != b.Len() || a.IsNil() != b.IsNil() {
			return fmt.Sprintf("%s: length %d != %d", at, a.Len(), b.Len())
		}
		for _, k := range a.MapKeys() {
			vb := b.MapIndex(k.Convert(b.Type().Key()))
			if !vb.IsValid() {
				return fmt.Sprintf("%s: key %v missing", at, k)
			}
			if d := sameValue(a.MapIndex(k), vb, fmt.Sprintf("%s[%v]", at, k)); d != "" {
				return d
			}
		}
	case reflect.String:
		if a.String() != b.String() {
			return fmt.Sprintf("%s: %q != %q", at, a.String(), b.String())
		}
	case reflect.Bool:
		if a.Bool() != b.Bool() {
			return fmt.Sprintf("%s: %v != %v", at, a.Bool(), b.Bool())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if a.Int() != b.Int() {
			return fmt.Sprintf("%s: %d != %d", at, a.Int(), b.Int())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if a.Uint() != b.Uint() {
			return fmt.Sprintf("%s: %d != %d", at, a.Uint(), b.Uint())
		}
	case reflect.Float32, reflect.Float64:
		if a.Float() != b.Float() {
			return fmt.Sprintf("%s: %v != %v", at, a.Float(), b.Float())
		}
	default:
		return fmt.Sprintf("%s: unexpected kind %s", at, a.Kind())
	}
	return ""
}

// TestComponentConfigMirrorsDecodeAsOriginals decodes component configs with
// the real types and with the mirrors: the same errors, word for word, and
// the same values. The wanted errors are written out too, so that a change of
// wording in both shows.
func TestComponentConfigMirrorsDecodeAsOriginals(t *testing.T) {
	kubelet := compareDecodes[kubeletv1beta1.KubeletConfiguration, componentconfig.KubeletConfiguration]
	proxy := compareDecodes[kubeproxyv1alpha1.KubeProxyConfiguration, componentconfig.KubeProxyConfiguration]
	for _, tc := range []struct {
		name   string
		decode func([]byte) (decoded, string)
		js     string
		want   []string
	}{
		{name: "kubelet, many fields", decode: kubelet, js: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration",
			"cgroupDriver":"systemd","clusterDNS":["10.96.0.10"],"clusterDomain":"cluster.local","rotateCertificates":true,
			"authentication":{"x509":{"clientCAFile":"/etc/kubernetes/pki/ca.crt"},"webhook":{"enabled":true,"cacheTTL":"2m0s"},"anonymous":{"enabled":false}},
			"authorization":{"mode":"Webhook","webhook":{"cacheAuthorizedTTL":"5m0s"}},
			"evictionHard":{"memory.available":"100Mi","nodefs.available":"10%"},"systemReserved":{"cpu":"500m","memory":"1Gi"},
			"registerWithTaints":[{"key":"k","value":"v","effect":"NoSchedule"}],
			"reservedMemory":[{"numaNode":0,"limits":{"memory":"1Gi"}}],
			"shutdownGracePeriodByPodPriority":[{"priority":100,"shutdownGracePeriodSeconds":30}],
			"logging":{"format":"text","flushFrequency":"5s","verbosity":2,"vmodule":[{"filePattern":"x*","verbosity":4}],
				"options":{"text":{"splitStream":true,"infoBufferSize":"5Mi"},"json":{"infoBufferSize":"1Ki"}}},
			"tracing":{"endpoint":"localhost:4317","samplingRatePerMillion":10},
			"featureGates":{"SomeGate":true},"memorySwap":{"swapBehavior":"NoSwap"},"maxPods":110,"podPidsLimit":-1,
			"cpuCFSQuotaPeriod":"100ms","containerLogMaxSize":"10Mi","crashLoopBackOff":{"maxContainerRestartPeriod":"1m"}}`},
		{name: "kubelet, flushFrequency as nanoseconds", decode: kubelet, js: `{"logging":{"flushFrequency":5000000000}}`},
		{name: "kubelet, unknown nested field", decode: kubelet, js: `{"authentication":{"x509":{"clientCAFile":"/a","clientCAFiles":"/b"}}}`,
			want: []string{`unknown field "authentication.x509.clientCAFiles"`}},
		{name: "kubelet, unknown field in a list", decode: kubelet, js: `{"registerWithTaints":[{"key":"k","effect":"NoSchedule","efect":"x"}]}`,
			want: []string{`unknown field "registerWithTaints[0].efect"`}},
		{name: "kubelet, wrong type", decode: kubelet, js: `{"authentication":{"webhook":{"enabled":"yes"}}}`,
			want: []string{`authentication.webhook.enabled: got a string, want a boolean`}},
		{name: "kubelet, wrong type in an embedded struct", decode: kubelet, js: `{"logging":{"options":{"json":{"splitStream":1}}}}`,
			want: []string{`logging.options.json.OutputRoutingOptions.splitStream: got a number, want a boolean`}},
		{name: "kubelet, wrong type in a named list", decode: kubelet, js: `{"logging":{"vmodule":{"filePattern":"x"}}}`,
			want: []string{`logging.vmodule: got a mapping, want a list of {name, value} entries`}},
		{name: "kubelet, duplicate key", decode: kubelet, js: `{"cgroupDriver":"systemd","maxPods":10,"cgroupDriver":"cgroupfs"}`,
			want: []string{`duplicate field "cgroupDriver"`}},
		{name: "kubelet, duplicate nested key and unknown field", decode: kubelet, js: `{"authorization":{"mode":"Webhook","mode":"AlwaysAllow"},"maxPod":1}`,
			want: []string{`duplicate field "authorization.mode"`, `unknown field "maxPod"`}},
		{name: "kubelet, bad flushFrequency string", decode: kubelet, js: `{"logging":{"flushFrequency":"5"}}`,
			want: []string{`time: missing unit in duration "5"`}},
		{name: "kubelet, bad flushFrequency type", decode: kubelet, js: `{"logging":{"flushFrequency":true}}`,
			want: []string{`: got a boolean, want a int64`}},
		{name: "kubelet, bad quantity", decode: kubelet, js: `{"logging":{"options":{"text":{"infoBufferSize":"lots"}}}}`,
			want: []string{`quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`}},
		{name: "proxy, many fields", decode: proxy, js: `{"apiVersion":"kubeproxy.config.k8s.io/v1alpha1","kind":"KubeProxyConfiguration",
			"mode":"ipvs","clusterCIDR":"10.244.0.0/16","bindAddress":"0.0.0.0","metricsBindAddress":"127.0.0.1:10249",
			"clientConnection":{"kubeconfig":"/var/lib/kube-proxy/kubeconfig.conf","qps":5,"burst":10},
			"iptables":{"masqueradeAll":false,"masqueradeBit":14,"syncPeriod":"30s"},"ipvs":{"scheduler":"rr","excludeCIDRs":["10.0.0.0/8"]},
			"conntrack":{"maxPerCore":32768,"min":131072,"tcpEstablishedTimeout":"24h0m0s"},
			"detectLocalMode":"ClusterCIDR","detectLocal":{"bridgeInterface":"br0"},"featureGates":{"SomeGate":false},
			"logging":{"flushFrequency":0,"verbosity":0,"options":{"json":{"infoBufferSize":"0"}}}}`},
		{name: "proxy, unknown nested field", decode: proxy, js: `{"iptables":{"masqueradeAll":true,"masqueradeBits":14}}`,
			want: []string{`unknown field "iptables.masqueradeBits"`}},
		{name: "proxy, wrong type", decode: proxy, js: `{"conntrack":{"maxPerCore":"many"}}`,
			want: []string{`conntrack.maxPerCore: got a string, want a int32`}},
		{name: "proxy, duplicate key", decode: proxy, js: `{"mode":"ipvs","mode":"nftables"}`,
			want: []string{`duplicate field "mode"`}},
		{name: "proxy, bad duration", decode: proxy, js: `{"iptables":{"syncPeriod":"soon"}}`,
			want: []string{`time: invalid duration "soon"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, diff := tc.decode([]byte(tc.js))
			if diff != "" {
				t.Fatal(diff)
			}
			if d := cmp.Diff(tc.want, got.errors); d != "" {
				t.Errorf("errors (-want +got):\n%s", d)
			}
		})
	}
}

// TestComponentConfigMirrorsDecodeKubeadmDefaults decodes the component
// configs kubeadm itself writes.
func TestComponentConfigMirrorsDecodeKubeadmDefaults(t *testing.T) {
	data, err := os.ReadFile("testdata/componentconfig/kubeadm-1.37.2-defaults.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%d documents, want 2", len(docs))
	}
	for i, compare := range []func([]byte) (decoded, string){
		compareDecodes[kubeletv1beta1.KubeletConfiguration, componentconfig.KubeletConfiguration],
		compareDecodes[kubeproxyv1alpha1.KubeProxyConfiguration, componentconfig.KubeProxyConfiguration],
	} {
		js, err := yaml.YAMLToJSON([]byte(docs[i]))
		if err != nil {
			t.Fatal(err)
		}
		got, diff := compare(js)
		if diff != "" {
			t.Errorf("document %d: %s", i+1, diff)
		}
		if len(got.errors) > 0 || !got.value.IsValid() {
			t.Errorf("document %d: errors %q", i+1, got.errors)
		}
	}
}

// TestComponentConfigMirrorsEveryField decodes, at every field of the real
// types (nested structs, list elements and map values included), values of
// every JSON type, the field twice, and an unknown field beside it, into the
// real types and the mirrors, and compares what they make of each.
func TestComponentConfigMirrorsEveryField(t *testing.T) {
	for _, tc := range []struct {
		root    reflect.Type
		compare func([]byte) (decoded, string)
	}{
		{reflect.TypeFor[kubeletv1beta1.KubeletConfiguration](), compareDecodes[kubeletv1beta1.KubeletConfiguration, componentconfig.KubeletConfiguration]},
		{reflect.TypeFor[kubeproxyv1alpha1.KubeProxyConfiguration](), compareDecodes[kubeproxyv1alpha1.KubeProxyConfiguration, componentconfig.KubeProxyConfiguration]},
	} {
		t.Run(tc.root.Name(), func(t *testing.T) {
			docs := probeDocuments(tc.root, func(inner string) string { return inner }, 0)
			refused := 0
			for _, js := range docs {
				got, diff := tc.compare([]byte(js))
				if diff != "" {
					t.Errorf("%s: %s", js, diff)
				}
				if len(got.errors) > 0 {
					refused++
				}
			}
			t.Logf("%d documents, %d refused", len(docs), refused)
			if len(docs) < 500 || refused == 0 || refused == len(docs) {
				t.Errorf("%d documents, %d refused: the probes do not exercise the schema", len(docs), refused)
			}
		})
	}
}

// probeValues are JSON values of every type, some valid for one field and
// wrong for others.
var probeValues = []string{`null`, `true`, `1`, `-1`, `1.5`, `5000000000`, `"x"`, `"5s"`, `"1Gi"`, `[]`, `[1]`, `["x"]`, `{}`, `{"x":1}`}

// probeDocuments returns documents that put each probe value at the
// position of type t, wrapped into a whole document by wrap; into the
// structs of the component's own packages it goes deeper.
func probeDocuments(t reflect.Type, wrap func(string) string, depth int) []string {
	var docs []string
	for _, v := range probeValues {
		docs = append(docs, wrap(v))
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if depth > 8 || !isComponentType(t) {
		return docs
	}
	switch t.Kind() {
	case reflect.Struct:
		if t == reflect.TypeFor[logsapi.TimeOrMetaDuration]() {
			return docs // it decodes itself: the values above are its probes
		}
		docs = append(docs, wrap(`{"unknownProbeField":1}`))
		for _, f := range jsonFields(t) {
			docs = append(docs, wrap(fmt.Sprintf(`{%q:null,%q:null}`, f.name, f.name)))
			docs = append(docs, probeDocuments(f.typ, func(inner string) string {
				return wrap(fmt.Sprintf(`{%q:%s}`, f.name, inner))
			}, depth+1)...)
		}
	case reflect.Slice, reflect.Array:
		docs = append(docs, probeDocuments(t.Elem(), func(inner string) string { return wrap("[" + inner + "]") }, depth+1)...)
	case reflect.Map:
		docs = append(docs, probeDocuments(t.Elem(), func(inner string) string { return wrap(`{"k":` + inner + "}") }, depth+1)...)
	}
	return docs
}

// isComponentType reports whether t is mirrored rather than kept; an unnamed
// type is looked into.
func isComponentType(t reflect.Type) bool {
	if t.Name() == "" {
		return true
	}
	for _, p := range []string{"k8s.io/kubelet/", "k8s.io/kube-proxy/", "k8s.io/component-base/"} {
		if strings.HasPrefix(t.PkgPath(), p) {
			return true
		}
	}
	return false
}

type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields lists the JSON fields of a struct as encoding/json sees them,
// the fields of untagged embedded structs promoted.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			out = append(out, jsonFields(ft)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name, f.Type})
	}
	return out
}
