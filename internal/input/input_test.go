package input

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// filled is n bytes of YAML: a mapping, then a comment up to n.
func filled(n int) []byte {
	head := "a: 1\n#"
	return []byte(head + strings.Repeat("x", n-len(head)))
}

func TestReadIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		err  error
	}{
		{"2 MiB", MaxBytes, nil},
		{"2 MiB and 1 byte", MaxBytes + 1, ErrTooLarge},
		{"empty", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := bytes.Repeat([]byte{'x'}, tc.size)
			// A stream (stdin, a pipe): only the limit stops it.
			got, err := Read(io.MultiReader(bytes.NewReader(data)))
			if !errors.Is(err, tc.err) || (err == nil && len(got) != tc.size) {
				t.Errorf("stream: %d bytes, %v; want %v", len(got), err, tc.err)
			}
			// A regular file, by name.
			path := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err = ReadFile(path)
			if !errors.Is(err, tc.err) || (err == nil && len(got) != tc.size) {
				t.Errorf("file: %d bytes, %v; want %v", len(got), err, tc.err)
			}
		})
	}
}

// A regular file is measured before it is read: a sparse terabyte is
// refused without a byte read.
func TestReadMeasuresARegularFileFirst(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 40); err != nil {
		t.Skipf("no sparse file here: %v", err)
	}
	if _, err := Read(f); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if off, _ := f.Seek(0, io.SeekCurrent); off != 0 {
		t.Errorf("%d bytes were read before refusing", off)
	}
}

// /dev/zero never ends: the limit ends the read.
func TestReadDevZero(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		_, err := ReadFile("/dev/zero")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "read /dev/zero: larger than 2 MiB") {
			t.Fatalf("got %v, want ErrTooLarge naming the file", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("reading /dev/zero did not end")
	}
}

func TestReadFileErrorsNameThePath(t *testing.T) {
	_, err := ReadFile(filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, os.ErrNotExist) || Refused(err) {
		t.Fatalf("got %v, want a not-exist error that is not a refusal", err)
	}
}

// The reviewer's construction: one anchored scalar aliased 100 times in a
// list, and that list aliased 100 times. With a scalar of size bytes, the
// text is about size+900 bytes and its JSON about 10000*size.
func bomb(size int) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n")
	b.WriteString("a: &a \"" + strings.Repeat("x", size) + "\"\n")
	b.WriteString("b: &b [" + strings.TrimSuffix(strings.Repeat("*a,", 100), ",") + "]\n")
	b.WriteString("c: [" + strings.TrimSuffix(strings.Repeat("*b,", 100), ",") + "]\n")
	return []byte(b.String())
}

func TestYAMLRefusesAnchorsAndAliases(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want string // "" for accepted
	}{
		{"the bomb", string(bomb(10000)), `YAML anchor &a on line 3: anchors and aliases are not accepted, as they can make a small file expand beyond any limit; write the value out in full`},
		{"an anchor alone", "a: 1\nb: &x 2\n", "YAML anchor &x on line 2: anchors and aliases are not accepted"},
		{"an anchored mapping", "a:\n  b: &m\n    c: 1\n", "YAML anchor &m on line 2: anchors and aliases are not accepted"},
		{"a merge key", "base: &base {a: 1}\nother:\n  <<: *base\n", "YAML anchor &base on line 1: anchors and aliases are not accepted"},
		{"flow style", `{"a": &x [1], "b": *x}`, "YAML anchor &x on line 1: anchors and aliases are not accepted"},
		{"an alias to an unknown anchor", "a: *nowhere\n", "unknown anchor 'nowhere' referenced"},
		{"'&' and '*' in strings", "a: \"x&y\"\nb: '*.example.com'\nc: a&b*c\n", ""},
		{"'&' and '*' in comments", "a: 1 # &x *x\n# &y\n", ""},
		{"a block scalar", "a: |\n  &x\n  *x\n", ""},
		{"JSON", `{"apiVersion": "v1", "args": ["--x=&y", "*"]}`, ""},
		{"an anchor in a later document (not read)", "a: 1\n---\nb: &x 2\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range []struct {
				name string
				fn   func([]byte) error
			}{
				{"YAMLToJSON", func(d []byte) error { _, err := YAMLToJSON(d); return err }},
				{"YAMLToJSONStrict", func(d []byte) error { _, err := YAMLToJSONStrict(d); return err }},
				{"Unmarshal", func(d []byte) error { var v any; return Unmarshal(d, &v) }},
				{"UnmarshalStrict", func(d []byte) error { var v map[string]any; return UnmarshalStrict(d, &v) }},
			} {
				err := f.fn([]byte(tc.text))
				got := ""
				if err != nil {
					got = err.Error()
				}
				if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
					t.Errorf("%s: got %q, want %q", f.name, got, tc.want)
				}
			}
		})
	}
}

func TestAliasErrorIsTyped(t *testing.T) {
	_, err := YAMLToJSON([]byte("a: 1\nb: &x 2\nc: *x\n"))
	var alias *AliasError
	if !errors.As(err, &alias) || !Refused(err) {
		t.Fatalf("got %v, want an *AliasError", err)
	}
	if diff := cmp.Diff(AliasError{Line: 2, Name: "x"}, *alias); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestYAMLIsBounded(t *testing.T) {
	if _, err := YAMLToJSON(filled(MaxBytes)); err != nil {
		t.Errorf("2 MiB: %v", err)
	}
	if _, err := YAMLToJSON(filled(MaxBytes + 1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("2 MiB and 1 byte: got %v, want ErrTooLarge", err)
	}
}

// What passes the check converts as sigs.k8s.io/yaml converts it: last
// duplicate wins unless strict, numbers exact.
func TestYAMLConvertsAsBefore(t *testing.T) {
	js, err := YAMLToJSON([]byte("a: 1\na: 2\nb: 12345678901234567890\nc: '*'\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(`{"a":2,"b":12345678901234567890,"c":"*"}`, string(js)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := YAMLToJSONStrict([]byte("a: 1\na: 2\n")); err == nil || !strings.Contains(err.Error(), `key "a" already set in map`) {
		t.Errorf("strict: got %v, want the duplicate refused", err)
	}
}
