package clusterconfig

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The fuzz targets feed the parser, validator and editors whatever bytes
// come; none may panic, and an edit must never leave a document that does
// not parse back. Seeds: the validation corpus and the test documents.
// `make fuzz` runs each for a bounded time.

func addCorpus(f *testing.F) [][]byte {
	var docs [][]byte
	for _, glob := range []string{"../../testdata/corpus/*.yaml", "../../testdata/documents/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err == nil {
				docs = append(docs, data)
			}
		}
	}
	return docs
}

func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"a.b.c", "apiServer.certSANs[0]", "x[+]", `featureGates["A.B"]`, `a['b\'c']`, "a[", "[0]", "a..b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePath(s)
		if err != nil {
			return
		}
		// What a path prints as must parse to the same path.
		again, err := ParsePath(p.String())
		if err != nil {
			t.Fatalf("%q printed as %q, which does not parse: %v", s, p, err)
		}
		if again.String() != p.String() {
			t.Fatalf("%q -> %q -> %q", s, p, again)
		}
	})
}

func FuzzValidate(f *testing.F) {
	for _, d := range addCorpus(f) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := Validate(data, ValidateOptions{})
		if r == nil || r.Errors == nil || r.Warnings == nil {
			t.Fatal("a report always has its lists")
		}
		_ = ValidateFile(data, ValidateOptions{})
	})
}

// FuzzSplitFile checks that the plugin cuts any input into the documents
// kubeadm's reader (apimachinery's YAMLReader) cuts it into.
func FuzzSplitFile(f *testing.F) {
	for _, in := range splitInputs {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want := yamlReaderChunks(string(data))
		chunks, _, err := splitChunks(data)
		if (err != nil) != (want == nil) {
			t.Fatalf("%q: err %v, YAMLReader %q", data, err, want)
		}
		if err == nil && !slices.EqualFunc(chunks, want, bytes.Equal) {
			t.Fatalf("%q: chunks %q, YAMLReader %q", data, chunks, want)
		}
	})
}

// FuzzEdit applies one fuzzed edit to each test document. The input is the
// edit's kind (first byte), then its argument and value separated by NUL.
func FuzzEdit(f *testing.F) {
	var bases []*Document
	for _, name := range []string{"v1beta3", "v1beta4", "v1"} {
		data, err := os.ReadFile("../../testdata/documents/" + name + ".yaml")
		if err != nil {
			f.Fatal(err)
		}
		d, err := Parse(data)
		if err != nil {
			f.Fatal(err)
		}
		bases = append(bases, d)
	}
	for _, seed := range []string{
		"\x00apiServer.extraArgs.v\x002",
		"\x00apiServer.certSANs[+]\x00lb.example.com",
		"\x01apiServer.extraArgs.audit-log-maxage",
		"\x02\x00{networking: {podSubnet: 10.0.0.0/8}}",
		"\x03[{\"op\":\"add\",\"path\":\"/x\",\"value\":1}]",
		"\x04featureGates[\"A.B\"]\x00true",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		if len(input) == 0 {
			return
		}
		kind, rest := input[0], string(input[1:])
		arg, value, _ := strings.Cut(rest, "\x00")
		for _, base := range bases {
			d := base.Clone()
			var err error
			switch kind % 5 {
			case 0:
				err = d.Set(arg, value)
			case 1:
				err = d.Unset(arg)
			case 2:
				err = d.MergePatch([]byte(value))
			case 3:
				err = d.JSONPatch([]byte(arg))
			case 4:
				err = d.SetString(arg, value)
			}
			if err != nil {
				continue
			}
			// Whatever the edit, the result marshals and parses back, with the
			// same apiVersion and kind.
			data, err := d.Marshal()
			if err != nil {
				continue // refused as a usage error, never written
			}
			back, err := Parse(data)
			if err != nil {
				t.Fatalf("edited document does not parse back: %v\n%s", err, data)
			}
			if back.APIVersion() != base.APIVersion() || !back.Equal(d) {
				t.Fatalf("edited document changed in a round trip:\n%s", data)
			}
		}
	})
}
