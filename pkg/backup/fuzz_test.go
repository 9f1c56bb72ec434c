package backup

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzRead writes a backup of any document, reads it back, and damages it:
// the reader gives back exactly what was written, and a change to any byte
// of the document is caught by the checksum. Damage to the header may be
// refused; it never panics.
func FuzzRead(f *testing.F) {
	doc, _ := os.ReadFile("../../testdata/documents/v1beta4.yaml")
	f.Add(doc, uint(10), byte('x'))
	f.Add([]byte(""), uint(0), byte(0))
	f.Add([]byte("# server: x\n---\n"), uint(3), byte('\n'))
	f.Fuzz(func(t *testing.T, doc []byte, at uint, to byte) {
		m := meta()
		data := append(encodeHeader(m), doc...)
		b, err := parse(data)
		if err != nil {
			t.Fatalf("a backup as written does not parse: %v", err)
		}
		if diff := cmp.Diff(string(doc), string(b.Document)); diff != "" {
			t.Fatalf("document (-want +got):\n%s", diff)
		}
		if b.Server != m.Server || b.UID != m.UID || b.ResourceVersion != m.ResourceVersion || b.Reason != m.Reason {
			t.Fatalf("metadata read back as %+v", b.Meta)
		}
		// A backup of doc with its own checksum is intact.
		sealed := meta()
		sealed.SHA256 = sum(doc)
		good, err := parse(append(encodeHeader(sealed), doc...))
		if err != nil || !good.ChecksumOK() {
			t.Fatalf("an intact backup fails its checksum: %v", err)
		}
		if len(doc) > 0 {
			damaged := append(encodeHeader(sealed), doc...)
			i := len(damaged) - len(doc) + int(at%uint(len(doc)))
			if damaged[i] == to {
				to++
			}
			damaged[i] = to
			if b, err := parse(damaged); err == nil && b.ChecksumOK() {
				t.Fatalf("a changed byte %d of the document passed the checksum", i)
			}
		}
		// Damage anywhere, header included: refused or read, never a panic.
		mutated := append([]byte{}, data...)
		if len(mutated) > 0 {
			mutated[int(at%uint(len(mutated)))] = to
			_, _ = parse(mutated)
		}
	})
}
