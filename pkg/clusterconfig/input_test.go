package clusterconfig

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Every parser of the package reads YAML anchors and aliases as kubeadm
// does, refuses text whose aliases expand it past the bound of package
// input before expanding any, and refuses text of more than 2 MiB.

// maxInput is the plugin's limit on any input (internal/input.MaxBytes).
const maxInput = 2 << 20

// expanding is a flow mapping that aliases expand a hundredfold twice: a
// 1 KB scalar aliased 100 times in a list, that list aliased 100 times
// (10 MB of JSON from 1.5 KB; the e2e test takes it to 100 MB). It fits
// wherever a YAML value does, and its alias *b passes the bound.
var expanding = `{"a": &a "` + strings.Repeat("x", 1000) + `", "b": &b [` + strings.TrimSuffix(strings.Repeat("*a, ", 100), ", ") + `], "c": [` + strings.TrimSuffix(strings.Repeat("*b, ", 100), ", ") + `]}`

// aliasBomb is a valid document with a field that expands, on line 32.
func aliasBomb(t *testing.T) []byte {
	t.Helper()
	return append(readTestDocument(t, "v1beta4"), []byte("# a comment\nbomb: "+expanding+"\n")...)
}

// padded is the v1beta4 test document followed by a comment line, n bytes
// in all.
func padded(t *testing.T, n int) []byte {
	t.Helper()
	doc := append(readTestDocument(t, "v1beta4"), "#"...)
	return append(doc, strings.Repeat("x", n-len(doc)-1)+"\n"...)
}

// expansionRefused is the start of how the alias *b is refused, on the
// line given.
func expansionRefused(line int) string {
	return "YAML alias *b on line " + strconv.Itoa(line) + " expands the document to more than "
}

const tooLarge = "larger than 2 MiB, the limit for any input (twice what a ConfigMap holds)"

// refusal is what one parser made of an input: its error or problems.
type refusal struct {
	msg  string
	code exitcode.Code
}

func parseRefusal(data []byte) refusal {
	_, err := Parse(data)
	if err == nil {
		return refusal{}
	}
	return refusal{err.Error(), exitcode.FromError(err)}
}

func validateRefusal(data []byte) refusal {
	return refusal{strings.Join(Validate(data, ValidateOptions{}).Errors, "; "), exitcode.Invalid}
}

func validateFileRefusal(data []byte) refusal {
	return refusal{strings.Join(ValidateFile(data, ValidateOptions{}).Errors, "; "), exitcode.Invalid}
}

func TestParsersBoundAliasExpansion(t *testing.T) {
	bomb := aliasBomb(t)
	for _, tc := range []struct {
		name  string
		parse func() refusal
		want  string
		code  exitcode.Code
	}{
		{"Parse", func() refusal { return parseRefusal(bomb) }, "the ClusterConfiguration cannot be used: " + expansionRefused(32), exitcode.Invalid},
		{"Validate", func() refusal { return validateRefusal(bomb) }, expansionRefused(32), exitcode.Invalid},
		// The line is the file's, not the document's.
		{"ValidateFile", func() refusal {
			return validateFileRefusal(append([]byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n---\n"), bomb...))
		}, "document 2 (line 4): " + expansionRefused(35), exitcode.Invalid},
		{"NewMergePatch", func() refusal {
			_, err := NewMergePatch([]byte("# a comment\nbomb: " + expanding + "\n"))
			return refusal{errString(err), exitcode.FromError(err)}
		}, "the patch cannot be used: " + expansionRefused(2), exitcode.Invalid},
		{"NewJSONPatch", func() refusal {
			_, err := NewJSONPatch([]byte(`[{"op": "add", "path": "/bomb", "value": ` + expanding + `}]`))
			return refusal{errString(err), exitcode.FromError(err)}
		}, "the patch cannot be used: " + expansionRefused(1), exitcode.Invalid},
		{"NewSet", func() refusal {
			e, err := NewSet("apiServer.certSANs", expanding)
			if err == nil {
				err = e.Apply(load(t, "v1beta4"))
			}
			return refusal{errString(err), exitcode.FromError(err)}
		}, "bad value for apiServer.certSANs: " + expansionRefused(1), exitcode.Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.parse()
			if !strings.Contains(got.msg, tc.want) || got.code != tc.code {
				t.Errorf("got %q (exit %d), want %q (exit %d)", got.msg, got.code, tc.want, tc.code)
			}
		})
	}
}

// A document with anchors and aliases is read as kubeadm reads it, and an
// edit writes it back with every value out in full (kubeadm's layout, as
// kubeadm's own upload would be): the stored text loses its anchors, never
// a value.
func TestAliasesAreReadAndWrittenInFull(t *testing.T) {
	stored := []byte(`apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: &version v1.37.2
apiServer:
  certSANs: &sans [cp.example.com, 192.0.2.10]
  extraArgs: &args
  - name: profiling
    value: "false"
  extraVolumes:
  - &audit {name: audit, hostPath: /var/log/audit, mountPath: /var/log/audit}
controllerManager: &component
  extraArgs: *args
  extraVolumes:
  - <<: *audit
    readOnly: true
scheduler: *component
etcd:
  local:
    serverCertSANs: *sans
    extraEnvs:
    - {name: KUBERNETES_VERSION, value: *version}
`)
	d, err := Parse(stored)
	if err != nil {
		t.Fatal(err)
	}
	if r := d.Validate(ValidateOptions{}); !r.Valid() {
		t.Fatalf("invalid: %q", r.Errors)
	}
	if err := d.MergePatch([]byte("apiServer:\n  certSANs: &s [lb.example.com]\netcd: {local: {peerCertSANs: *s}}\n")); err != nil {
		t.Fatal(err)
	}
	want := `apiServer:
  certSANs:
  - lb.example.com
  extraArgs:
  - name: profiling
    value: "false"
  extraVolumes:
  - hostPath: /var/log/audit
    mountPath: /var/log/audit
    name: audit
apiVersion: kubeadm.k8s.io/v1beta4
controllerManager:
  extraArgs:
  - name: profiling
    value: "false"
  extraVolumes:
  - hostPath: /var/log/audit
    mountPath: /var/log/audit
    name: audit
    readOnly: true
etcd:
  local:
    extraEnvs:
    - name: KUBERNETES_VERSION
      value: v1.37.2
    peerCertSANs:
    - lb.example.com
    serverCertSANs:
    - cp.example.com
    - 192.0.2.10
kind: ClusterConfiguration
kubernetesVersion: v1.37.2
scheduler:
  extraArgs:
  - name: profiling
    value: "false"
  extraVolumes:
  - hostPath: /var/log/audit
    mountPath: /var/log/audit
    name: audit
    readOnly: true
`
	if diff := cmp.Diff(want, string(d.MustMarshal())); diff != "" {
		t.Errorf("written (-want +got):\n%s", diff)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestParsersAreBounded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parse func([]byte) refusal
		want  string
	}{
		{"Parse", parseRefusal, "the ClusterConfiguration cannot be used: " + tooLarge},
		{"Validate", validateRefusal, tooLarge},
		{"ValidateFile", validateFileRefusal, "the file is " + tooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.parse(padded(t, maxInput)); got.msg != "" {
				t.Errorf("2 MiB: %q, want it accepted", got.msg)
			}
			if got := tc.parse(padded(t, maxInput+1)); !strings.Contains(got.msg, tc.want) || got.code != exitcode.Invalid {
				t.Errorf("2 MiB and 1 byte: %q (exit %d), want %q (exit 3)", got.msg, got.code, tc.want)
			}
		})
	}
}
