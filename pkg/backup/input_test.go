package backup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The store's files are read up to 2 MiB (internal/input.MaxBytes): a
// larger file, which the store never writes, is refused unread as invalid.
// A backup's document, kept byte for byte as it was stored, is read with
// its YAML anchors and aliases, and refused unexpanded when they expand it
// past the bound of internal/input.

// grow writes data to path padded with blanks to n bytes (YAML and JSON
// both read past them).
func grow(t *testing.T, path string, data []byte, n int) {
	t.Helper()
	data = append(data[:len(data):len(data)], strings.Repeat(" ", n-len(data)-1)+"\n"...)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestStoreFilesAreReadUpTo2MiB(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	b, err := s.Write(doc(t), meta())
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.WriteManifest([]byte("apiVersion: v1\nkind: Pod\n"), ManifestMeta{Node: "cp-1", Component: "kube-scheduler", Path: "/m", ConfigBackup: b.Name})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkLastGood(b, "cp-1"); err != nil {
		t.Fatal(err)
	}
	mark := "last-known-good--kube-system--kubeadm-config--cp-1.json"
	for _, tc := range []struct {
		what, path string
		read       func() error
	}{
		{"backup " + b.Name, b.Path, func() error { _, err := s.Read(b.Name); return err }},
		{"manifest backup " + m.Name, m.Path, func() error { _, err := s.ReadManifest(m.Name); return err }},
		{"last known good record " + mark, filepath.Join(s.Dir, mark), func() error { _, err := s.LastGoods(); return err }},
	} {
		t.Run(tc.what, func(t *testing.T) {
			data, err := os.ReadFile(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			grow(t, tc.path, data, 2<<20)
			if err := tc.read(); err != nil {
				t.Fatalf("2 MiB: %v", err)
			}
			grow(t, tc.path, data, 2<<20+1)
			err = tc.read()
			if want := tc.what + " is larger than 2 MiB, the limit for any input (twice what a ConfigMap holds)"; err == nil || err.Error() != want || exitcode.FromError(err) != exitcode.Invalid {
				t.Fatalf("2 MiB and 1 byte: got %v (exit %d), want %q (exit 3)", err, exitcode.FromError(err), want)
			}
		})
	}
}

func TestVerifyBoundsAliasesInABackup(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	// The node CIDR's mask, as a hand edit of the ConfigMap could name it
	// once and use it twice: kept as it is, and valid.
	aliased := []byte(strings.Replace(string(doc(t)), "  - name: node-cidr-mask-size\n    value: \"24\"\n",
		"  - &mask\n    name: node-cidr-mask-size\n    value: \"24\"\n  - *mask\n", 1))
	bomb := append(doc(t), "x-a: &a \""+strings.Repeat("x", 1000)+"\"\n"+
		"x-b: &b ["+strings.TrimSuffix(strings.Repeat("*a,", 100), ",")+"]\n"+
		"x-c: ["+strings.TrimSuffix(strings.Repeat("*b,", 100), ",")+"]\n"...)
	for _, tc := range []struct {
		name     string
		document []byte
		want     string // the start of the one problem; "" for none
	}{
		{"aliases", aliased, ""},
		{"aliases past the bound", bomb, "YAML alias *b on line 33 expands the document to more than "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(tc.document), "*") {
				t.Fatal("the document has no alias")
			}
			b, err := s.Write(tc.document, meta())
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.Read(b.Name)
			if err != nil {
				t.Fatal(err)
			}
			if string(r.Document) != string(tc.document) {
				t.Errorf("the backup holds %q, want the document byte for byte", r.Document)
			}
			problems := r.Verify(clusterconfig.ValidateOptions{})
			if tc.want == "" && len(problems) != 0 || tc.want != "" && (len(problems) != 1 || !strings.HasPrefix(problems[0], tc.want)) {
				t.Fatalf("got %q, want one problem starting %q, or none for \"\"", problems, tc.want)
			}
		})
	}
}
