package clusterconfig

import (
	"strings"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// A second apiServer block, added at the bottom instead of editing the
// first: read leniently, it replaces the first, and extraArgs is gone.
// ParseStrict, which reads what a person wrote, refuses it; Parse, which
// reads a stored document as kubeadm does, keeps the last.
func TestParseStrictRefusesDuplicateKeys(t *testing.T) {
	text := append(readTestDocument(t, "v1beta4"), "apiServer:\n  certSANs:\n  - b.example.com\n"...)

	_, err := ParseStrict(text)
	want := `the ClusterConfiguration gives a key twice, which kubeadm refuses (line 32: key "apiServer" already set in map); keep one`
	if err == nil || err.Error() != want || exitcode.FromError(err) != exitcode.Invalid {
		t.Errorf("ParseStrict: got %v (exit %d), want %q (exit 3)", err, exitcode.FromError(err), want)
	}

	d, err := Parse(text)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if js := string(d.JSON()); strings.Contains(js, "audit-log-maxage") {
		t.Errorf("Parse no longer keeps the last of a key given twice: %s", js)
	}

	// Everything else reads as Parse reads it.
	for _, text := range [][]byte{readTestDocument(t, "v1beta4"), []byte("apiVersion: v1\n"), []byte("[1]"), nil} {
		strict, serr := ParseStrict(text)
		lax, lerr := Parse(text)
		if errString(serr) != errString(lerr) || (serr == nil && !strict.Equal(lax)) {
			t.Errorf("%q: ParseStrict gives %v, Parse %v", text, serr, lerr)
		}
	}
}
