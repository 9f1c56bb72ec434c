package clusterconfig

import (
	"strconv"
	"strings"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Every parser of the package refuses YAML anchors and aliases before
// expanding any, and text of more than 2 MiB.

// maxInput is the plugin's limit on any input (internal/input.MaxBytes).
const maxInput = 2 << 20

// aliasBomb is a valid document with a field that expands: a 1 KB scalar
// aliased 100 times in a list, that list aliased 100 times (10 MB of JSON
// from 2 KB; the e2e test takes it to 100 MB).
func aliasBomb(t *testing.T) []byte {
	t.Helper()
	return append(readTestDocument(t, "v1beta4"), []byte("# a comment\nbomb:\n  a: &a \""+strings.Repeat("x", 1000)+"\"\n"+
		"  b: &b ["+strings.TrimSuffix(strings.Repeat("*a,", 100), ",")+"]\n"+
		"  c: ["+strings.TrimSuffix(strings.Repeat("*b,", 100), ",")+"]\n")...)
}

// padded is the v1beta4 test document followed by a comment line, n bytes
// in all.
func padded(t *testing.T, n int) []byte {
	t.Helper()
	doc := append(readTestDocument(t, "v1beta4"), "#"...)
	return append(doc, strings.Repeat("x", n-len(doc)-1)+"\n"...)
}

// anchorRefused is how the anchor &a is refused, on the line given.
func anchorRefused(line int) string {
	return "YAML anchor &a on line " + strconv.Itoa(line) + ": anchors and aliases are not accepted, as they can make a small file expand beyond any limit; write the value out in full"
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

func TestParsersRefuseAnchorsAndAliases(t *testing.T) {
	bomb := aliasBomb(t)
	patch := []byte("bomb:\n  a: &a \"" + strings.Repeat("x", 1000) + "\"\n  b: [*a, *a]\n")
	jsonPatch := []byte(`[{"op": "add", "path": "/a", "value": &a "x"}, {"op": "add", "path": "/b", "value": *a}]`)
	value := "&a [x.example.com]"
	for _, tc := range []struct {
		name  string
		parse func() refusal
		want  string
		code  exitcode.Code
	}{
		{"Parse", func() refusal { return parseRefusal(bomb) }, "the ClusterConfiguration cannot be used: " + anchorRefused(33), exitcode.Invalid},
		{"Validate", func() refusal { return validateRefusal(bomb) }, anchorRefused(33), exitcode.Invalid},
		// The line is the file's, not the document's.
		{"ValidateFile", func() refusal {
			return validateFileRefusal(append([]byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n---\n"), bomb...))
		}, "document 2 (line 4): " + anchorRefused(36), exitcode.Invalid},
		{"NewMergePatch", func() refusal {
			_, err := NewMergePatch(patch)
			return refusal{errString(err), exitcode.FromError(err)}
		}, "the patch cannot be used: " + anchorRefused(2), exitcode.Invalid},
		{"NewJSONPatch", func() refusal {
			_, err := NewJSONPatch(jsonPatch)
			return refusal{errString(err), exitcode.FromError(err)}
		}, "the patch cannot be used: " + anchorRefused(1), exitcode.Invalid},
		{"NewSet", func() refusal {
			e, err := NewSet("apiServer.certSANs", value)
			if err == nil {
				err = e.Apply(load(t, "v1beta4"))
			}
			return refusal{errString(err), exitcode.FromError(err)}
		}, "bad value for apiServer.certSANs: " + anchorRefused(1), exitcode.Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.parse()
			if !strings.Contains(got.msg, tc.want) || got.code != tc.code {
				t.Errorf("got %q (exit %d), want %q (exit %d)", got.msg, got.code, tc.want, tc.code)
			}
		})
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
