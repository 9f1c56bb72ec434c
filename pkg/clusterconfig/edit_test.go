package clusterconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// readTestDocument returns testdata/documents/NAME.yaml.
func readTestDocument(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../testdata/documents", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func load(t *testing.T, name string) *Document {
	t.Helper()
	d, err := Parse(readTestDocument(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// op is one edit as the patch command applies it.
type op struct {
	kind, arg, value string
}

func set(p, v string) op       { return op{"set", p, v} }
func setString(p, v string) op { return op{"set-string", p, v} }
func unset(p string) op        { return op{"unset", p, ""} }
func merge(patch string) op    { return op{"merge", patch, ""} }
func jsonp(patch string) op    { return op{"json", patch, ""} }

func (o op) apply(d *Document) error {
	switch o.kind {
	case "set":
		return d.Set(o.arg, o.value)
	case "set-string":
		return d.SetString(o.arg, o.value)
	case "unset":
		return d.Unset(o.arg)
	case "merge":
		return d.MergePatch([]byte(o.arg))
	default:
		return d.JSONPatch([]byte(o.arg))
	}
}

// lookup reads path from d as JSON ("<absent>" when missing).
func lookup(t *testing.T, d *Document, path string) string {
	t.Helper()
	p, err := ParsePath(path)
	if err != nil {
		t.Fatal(err)
	}
	v, found, err := getIn(d.tree, p)
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		return "<absent>"
	}
	js, _ := json.Marshal(v)
	return string(js)
}

func TestEdits(t *testing.T) {
	for _, tc := range []struct {
		name string
		base string
		ops  []op
		want map[string]string // path -> JSON value after the edits
	}{
		{"set a nested key", "v1beta4", []op{set("networking.podSubnet", "10.32.0.0/12")},
			map[string]string{"networking.podSubnet": `"10.32.0.0/12"`}},
		{"set creates mappings", "v1beta4", []op{set("etcd.local.serverCertSANs[+]", "etcd.example.com")},
			map[string]string{"etcd.local.serverCertSANs": `["etcd.example.com"]`}},
		{"string field keeps text", "v1beta4", []op{set("kubernetesVersion", "1.37")},
			map[string]string{"kubernetesVersion": `"1.37"`}},
		{"bool field parses YAML", "v1beta4", []op{set(`featureGates["RootlessControlPlane"]`, "true")},
			map[string]string{"featureGates": `{"RootlessControlPlane":true}`}},
		{"dns.disabled parses YAML", "v1beta4", []op{set("dns.disabled", "true")},
			map[string]string{"dns.disabled": `true`}},
		{"list value", "v1beta4", []op{set("apiServer.certSANs", "[a.example.com, 10.0.0.1]")},
			map[string]string{"apiServer.certSANs": `["a.example.com","10.0.0.1"]`}},
		{"mapping value on an unknown path", "v1beta4", []op{set("x", "{k: 30}")},
			map[string]string{"x": `{"k":30}`}},
		{"index replaces", "v1beta4", []op{set("apiServer.certSANs[0]", "10.0.0.9")},
			map[string]string{"apiServer.certSANs": `["10.0.0.9"]`}},
		{"append", "v1beta4", []op{set("apiServer.certSANs[+]", "lb.example.com")},
			map[string]string{"apiServer.certSANs": `["192.0.2.10","lb.example.com"]`}},
		{"unset index", "v1beta4", []op{unset("apiServer.certSANs[0]")},
			map[string]string{"apiServer.certSANs": `[]`}},
		{"unset key", "v1beta4", []op{unset("networking.podSubnet")},
			map[string]string{"networking.podSubnet": `<absent>`, "networking.serviceSubnet": `"10.96.0.0/12"`}},
		{"unset absent is a no-op", "v1beta4", []op{unset("networking.nothing"), unset("nothing.at.all")},
			map[string]string{"networking.podSubnet": `"10.244.0.0/16"`}},
		{"quoted key with dots", "v1beta4", []op{set(`x["a.b"]`, "1")},
			map[string]string{`x["a.b"]`: `1`}},

		{"v1beta4 arg replaced in place", "v1beta4", []op{set("apiServer.extraArgs.audit-log-maxage", "60")},
			map[string]string{"apiServer.extraArgs": `[{"name":"audit-log-maxage","value":"60"}]`}},
		{"v1beta4 arg appended", "v1beta4", []op{set("apiServer.extraArgs.profiling", "false")},
			map[string]string{"apiServer.extraArgs": `[{"name":"audit-log-maxage","value":"30"},{"name":"profiling","value":"false"}]`}},
		{"v1beta4 arg on a component without args", "v1beta4", []op{set("scheduler.extraArgs.v", "2")},
			map[string]string{"scheduler.extraArgs": `[{"name":"v","value":"2"}]`}},
		{"v1beta4 etcd arg", "v1beta4", []op{set("etcd.local.extraArgs.quota-backend-bytes", "8589934592")},
			map[string]string{"etcd.local.extraArgs": `[{"name":"quota-backend-bytes","value":"8589934592"}]`}},
		{"v1beta4 arg unset removes the list", "v1beta4", []op{unset("apiServer.extraArgs.audit-log-maxage")},
			map[string]string{"apiServer.extraArgs": `<absent>`}},
		{"v1beta4 arg unset of a duplicate removes all", "v1beta4", []op{
			set("apiServer.extraArgs[+]", "{name: x, value: '1'}"), set("apiServer.extraArgs[+]", "{name: x, value: '2'}"),
			unset("apiServer.extraArgs.x")},
			map[string]string{"apiServer.extraArgs": `[{"name":"audit-log-maxage","value":"30"}]`}},
		{"v1beta4 arg by index", "v1beta4", []op{set("apiServer.extraArgs[0].value", "90")},
			map[string]string{"apiServer.extraArgs": `[{"name":"audit-log-maxage","value":"90"}]`}},
		{"v1 arg keeps list shape", "v1", []op{set("controllerManager.extraArgs.node-cidr-mask-size", "25")},
			map[string]string{"controllerManager.extraArgs": `[{"name":"node-cidr-mask-size","value":"25"}]`}},
		{"v1beta3 arg map entry", "v1beta3", []op{set("apiServer.extraArgs.profiling", "false")},
			map[string]string{"apiServer.extraArgs": `{"audit-log-maxage":"30","profiling":"false"}`}},
		{"v1beta3 arg unset", "v1beta3", []op{unset("apiServer.extraArgs.audit-log-maxage")},
			map[string]string{"apiServer.extraArgs": `{}`}},
		{"v1beta3 duration is text", "v1beta3", []op{set("apiServer.timeoutForControlPlane", "5m0s")},
			map[string]string{"apiServer.timeoutForControlPlane": `"5m0s"`}},

		{"set-string keeps a number as text", "v1beta4", []op{setString("x.y", "30")},
			map[string]string{"x.y": `"30"`}},
		{"merge patch YAML", "v1beta4", []op{merge("networking: {podSubnet: 10.32.0.0/12}")},
			map[string]string{"networking.podSubnet": `"10.32.0.0/12"`, "networking.serviceSubnet": `"10.96.0.0/12"`}},
		{"merge patch null deletes", "v1beta4", []op{merge(`{"networking":{"podSubnet":null}}`)},
			map[string]string{"networking.podSubnet": `<absent>`}},
		{"json patch with a passing test", "v1beta4", []op{jsonp(`[{"op":"test","path":"/clusterName","value":"kubernetes"},{"op":"replace","path":"/clusterName","value":"prod"}]`)},
			map[string]string{"clusterName": `"prod"`}},
		{"json patch in YAML", "v1beta4", []op{jsonp("- {op: add, path: /apiServer/certSANs/-, value: lb.example.com}")},
			map[string]string{"apiServer.certSANs": `["192.0.2.10","lb.example.com"]`}},
		{"edits apply in order", "v1beta4", []op{set("clusterName", "a"), merge("clusterName: b"), set("clusterName", "c")},
			map[string]string{"clusterName": `"c"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := load(t, tc.base)
			orig := d.Clone()
			for _, o := range tc.ops {
				if err := o.apply(d); err != nil {
					t.Fatalf("%s %s: %v", o.kind, o.arg, err)
				}
			}
			for path, want := range tc.want {
				if diff := cmp.Diff(want, lookup(t, d, path)); diff != "" {
					t.Errorf("%s (-want +got):\n%s", path, diff)
				}
			}
			if d.APIVersion() != orig.APIVersion() {
				t.Errorf("apiVersion changed to %s", d.APIVersion())
			}
		})
	}
}

func TestEditErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		base     string
		op       op
		wantCode exitcode.Code
		wantMsg  string
	}{
		{"apiVersion refused", "v1beta4", set("apiVersion", "kubeadm.k8s.io/v1"), exitcode.Usage,
			"changing apiVersion is refused (the document stays kubeadm.k8s.io/v1beta4 ClusterConfiguration)"},
		{"kind refused by merge patch", "v1beta4", merge("kind: InitConfiguration"), exitcode.Usage,
			"changing kind is refused (the document stays kubeadm.k8s.io/v1beta4 ClusterConfiguration)"},
		{"apiVersion refused by json patch", "v1beta4", jsonp(`[{"op":"remove","path":"/apiVersion"}]`), exitcode.Usage,
			"changing apiVersion is refused (the document stays kubeadm.k8s.io/v1beta4 ClusterConfiguration)"},
		{"index out of range", "v1beta4", set("apiServer.certSANs[3]", "x"), exitcode.Usage,
			"apiServer.certSANs[3]: index out of range (the list has 1 items; use [+] to append)"},
		{"key into a list", "v1beta4", set("apiServer.certSANs.x", "1"), exitcode.Usage,
			"apiServer.certSANs is a list; address it with an index such as apiServer.certSANs[0]"},
		{"key into a string", "v1beta4", set("clusterName.x", "1"), exitcode.Usage,
			"clusterName holds a string, not a mapping or list"},
		{"bad path", "v1beta4", set("a..b", "1"), exitcode.Usage, `bad path "a..b": empty key`},
		{"bad index", "v1beta4", set("a[x]", "1"), exitcode.Usage, `bad path "a[x]": list index must be a number >= 0 or + to append, not "x"`},
		{"unterminated quote", "v1beta4", set(`a["b]`, "1"), exitcode.Usage, `bad path "a[\"b]": unterminated quoted key`},
		{"bad YAML value", "v1beta4", set("x", "{a: [}"), exitcode.Usage, ""},
		{"duplicate arg names", "v1beta4", set("apiServer.extraArgs.audit-log-maxage", "1"), exitcode.Usage, ""},
		{"merge patch not YAML", "v1beta4", merge("{a: [}"), exitcode.Usage, ""},
		{"merge patch a list", "v1beta4", merge("[1, 2]"), exitcode.Usage, "a merge patch must be a mapping"},
		{"empty patch", "v1beta4", merge("  "), exitcode.Usage, "the patch is empty"},
		{"json patch not a list", "v1beta4", jsonp(`{"op":"add"}`), exitcode.Usage, ""},
		{"json patch missing path", "v1beta4", jsonp(`[{"op":"replace","path":"/nope/x","value":1}]`), exitcode.Usage, ""},
		{"invalid UTF-8 value (found by FuzzEdit)", "v1beta4", setString("x", "\x80"), exitcode.Usage,
			"the value for x is not valid UTF-8"},
		{"invalid UTF-8 path", "v1beta4", set("x\xff", "1"), exitcode.Usage, `the path "x\xff" is not valid UTF-8`},
		{"json patch failing test", "v1beta4", jsonp(`[{"op":"test","path":"/clusterName","value":"other"}]`), exitcode.Conflict,
			"json patch: testing value /clusterName failed: test failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := load(t, tc.base)
			if tc.name == "duplicate arg names" {
				_ = d.Set("apiServer.extraArgs[+]", "{name: audit-log-maxage, value: '60'}")
			}
			before := d.Clone()
			err := tc.op.apply(d)
			if err == nil {
				t.Fatal("want an error")
			}
			if got := exitcode.FromError(err); got != tc.wantCode {
				t.Errorf("exit code = %d, want %d (%v)", got, tc.wantCode, err)
			}
			if tc.wantMsg != "" {
				if diff := cmp.Diff(tc.wantMsg, err.Error()); diff != "" {
					t.Errorf("message (-want +got):\n%s", diff)
				}
			}
			if tc.op.kind != "set" && tc.op.kind != "unset" && !d.Equal(before) {
				t.Error("a failed patch changed the document")
			}
		})
	}
}

func TestUnchangedDetection(t *testing.T) {
	d := load(t, "v1beta4")
	orig := d.Clone()
	for _, o := range []op{
		set("clusterName", "kubernetes"),
		set("apiServer.extraArgs.audit-log-maxage", "30"),
		unset("networking.nothing"),
		merge("networking: {podSubnet: 10.244.0.0/16}"),
	} {
		if err := o.apply(d); err != nil {
			t.Fatal(err)
		}
	}
	if !d.Equal(orig) {
		t.Fatalf("edits that restate the document must leave it equal:\n%s", d.MustMarshal())
	}
	if err := d.Set("clusterName", "other"); err != nil {
		t.Fatal(err)
	}
	if d.Equal(orig) {
		t.Fatal("a real change must be detected")
	}
}

func TestMarshalKeepsKubeadmLayout(t *testing.T) {
	for _, name := range []string{"v1beta3", "v1beta4", "v1"} {
		data := readTestDocument(t, name)
		d, err := Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(data), string(d.MustMarshal())); diff != "" {
			t.Errorf("%s: marshal differs from kubeadm's layout (-want +got):\n%s", name, diff)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"not YAML", "a: [", ""},
		{"a list", "- 1\n", ""},
		{"empty", "", ""},
		{"other kind", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n", `the document is of kind "InitConfiguration", not ClusterConfiguration`},
		{"unknown apiVersion", "apiVersion: kubeadm.k8s.io/v1beta2\nkind: ClusterConfiguration\n",
			`unsupported apiVersion "kubeadm.k8s.io/v1beta2" (want kubeadm.k8s.io/v1beta4, kubeadm.k8s.io/v1 or kubeadm.k8s.io/v1beta3)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatal("want an error")
			}
			if exitcode.FromError(err) != exitcode.Invalid {
				t.Errorf("exit code %d, want %d", exitcode.FromError(err), exitcode.Invalid)
			}
			if tc.want != "" && err.Error() != tc.want {
				t.Errorf("error = %q, want %q", err, tc.want)
			}
		})
	}
}

func TestParsePath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a.b.c", "a.b.c"},
		{"a[0].b", "a[0].b"},
		{"a[+]", "a[+]"},
		{`a["b.c"].d`, `a["b.c"].d`},
		{`a['b.c']`, `a["b.c"]`},
		{"apiServer.extraArgs.audit-log-maxage", "apiServer.extraArgs.audit-log-maxage"},
	} {
		p, err := ParsePath(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if p.String() != tc.want {
			t.Errorf("ParsePath(%q).String() = %q, want %q", tc.in, p, tc.want)
		}
	}
	for _, bad := range []string{"", ".a", "a.", "a[", "a]", "[0]", "a[-1]", "a[0]b"} {
		if _, err := ParsePath(bad); err == nil {
			t.Errorf("ParsePath(%q): want an error", bad)
		}
	}
}
