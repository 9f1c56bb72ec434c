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

// reconfigure finds the node's etcd client certificate under
// certificatesDir, and leaves an external etcd alone.
func TestCertificatesDirAndExternalEtcd(t *testing.T) {
	for _, tc := range []struct {
		doc      string
		dir      string
		external bool
	}{
		{"kind: ClusterConfiguration\n", "", false},
		{"kind: ClusterConfiguration\ncertificatesDir: /srv/pki\netcd:\n  local:\n    dataDir: /var/lib/etcd\n", "/srv/pki", false},
		{"kind: ClusterConfiguration\netcd:\n  external:\n    endpoints: [https://192.0.2.20:2379]\n", "", true},
	} {
		d, err := Parse([]byte("apiVersion: kubeadm.k8s.io/v1beta4\n" + tc.doc))
		if err != nil {
			t.Fatal(err)
		}
		if d.CertificatesDir() != tc.dir || d.ExternalEtcd() != tc.external {
			t.Errorf("%q: certificatesDir %q, external %v; want %q, %v", tc.doc, d.CertificatesDir(), d.ExternalEtcd(), tc.dir, tc.external)
		}
	}
}
