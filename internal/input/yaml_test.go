package input

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// filled is n bytes of YAML: a mapping, then a comment up to n.
func filled(n int) []byte {
	head := "a: 1\n#"
	return []byte(head + strings.Repeat("x", n-len(head)))
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

// billionLaughs is the classic: nine levels, each a list of ten aliases to
// the level before. Under 500 bytes of text, 10^9 values.
func billionLaughs() []byte {
	var b strings.Builder
	b.WriteString("l0: &l0 lol\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), 10), ","))
	}
	return []byte(b.String())
}

// converters are the four ways in, each as one function.
var converters = []struct {
	name string
	fn   func([]byte) error
}{
	{"YAMLToJSON", func(d []byte) error { _, err := YAMLToJSON(d); return err }},
	{"YAMLToJSONStrict", func(d []byte) error { _, err := YAMLToJSONStrict(d); return err }},
	{"Unmarshal", func(d []byte) error { var v any; return Unmarshal(d, &v) }},
	{"UnmarshalStrict", func(d []byte) error { var v map[string]any; return UnmarshalStrict(d, &v) }},
}

// Anchors and aliases are read as kubeadm reads them: what sigs.k8s.io/yaml
// makes of the text, alias by alias, is what comes out, through every way
// in.
func TestYAMLReadsAliasesAsKubeadm(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"an alias to a scalar", "kubernetesVersion: &v v1.37.2\nimage: *v\n",
			`{"image":"v1.37.2","kubernetesVersion":"v1.37.2"}`},
		{"an alias to a sequence", "certSANs: &sans [cp.example.com, 192.0.2.10]\netcd: {serverCertSANs: *sans}\n",
			`{"certSANs":["cp.example.com","192.0.2.10"],"etcd":{"serverCertSANs":["cp.example.com","192.0.2.10"]}}`},
		{"an alias to a mapping", "apiServer: &c\n  extraArgs: {v: \"2\"}\nscheduler: *c\n",
			`{"apiServer":{"extraArgs":{"v":"2"}},"scheduler":{"extraArgs":{"v":"2"}}}`},
		{"nested aliases", "args: &args [{name: v, value: \"2\"}]\napiServer: &c {extraArgs: *args}\ncontrollerManager: *c\nscheduler: {extraArgs: *args, more: [*c]}\n",
			`{"apiServer":{"extraArgs":[{"name":"v","value":"2"}]},"args":[{"name":"v","value":"2"}],"controllerManager":{"extraArgs":[{"name":"v","value":"2"}]},"scheduler":{"extraArgs":[{"name":"v","value":"2"}],"more":[{"extraArgs":[{"name":"v","value":"2"}]}]}}`},
		{"a merge key", "base: &base {pathType: DirectoryOrCreate, readOnly: true}\nvolume:\n  <<: *base\n  name: audit\n",
			`{"base":{"pathType":"DirectoryOrCreate","readOnly":true},"volume":{"name":"audit","pathType":"DirectoryOrCreate","readOnly":true}}`},
		{"a merge key of two", "a: &a {p: 1}\nb: &b {q: 2}\nc:\n  <<: [*a, *b]\n  r: 3\n",
			`{"a":{"p":1},"b":{"q":2},"c":{"p":1,"q":2,"r":3}}`},
		{"an anchor given twice", "a: &x 1\nb: *x\nc: &x 2\nd: *x\n", `{"a":1,"b":1,"c":2,"d":2}`},
		{"flow style", `{"a": &x [1], "b": *x}`, `{"a":[1],"b":[1]}`},
		{"an anchor alone", "a: 1\nb: &x 2\n", `{"a":1,"b":2}`},
		{"'&' and '*' in strings", "a: \"x&y\"\nb: '*.example.com'\nc: a&b*c\n", `{"a":"x\u0026y","b":"*.example.com","c":"a\u0026b*c"}`},
		{"'&' and '*' in comments", "a: 1 # &x *x\n# &y\n", `{"a":1}`},
		{"a block scalar", "a: |\n  &x\n  *x\n", `{"a":"\u0026x\n*x\n"}`},
		{"an alias in a later document (not read)", "a: 1\n---\nb: &x 2\nc: *x\n", `{"a":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range converters {
				if err := c.fn([]byte(tc.text)); err != nil {
					t.Errorf("%s: %v", c.name, err)
				}
			}
			got, err := YAMLToJSON([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			kubeadm, err := yaml.YAMLToJSON([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(kubeadm), string(got)); diff != "" {
				t.Errorf("not as sigs.k8s.io/yaml reads it (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A merge key is yaml.v2's: a key the mapping gives again after "<<" is a
// key given twice, which the strict reading (kubeadm config validate's)
// refuses and the lax one gives its own value.
func TestYAMLMergeKeyGivenAgain(t *testing.T) {
	text := []byte("base: &base {a: 1, b: 2}\nother:\n  <<: *base\n  b: 3\n")
	js, err := YAMLToJSON(text)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(`{"base":{"a":1,"b":2},"other":{"a":1,"b":3}}`, string(js)); diff != "" {
		t.Errorf("lax (-want +got):\n%s", diff)
	}
	if _, err := YAMLToJSONStrict(text); err == nil || !strings.Contains(err.Error(), `line 4: key "b" already set in map`) {
		t.Errorf("strict: got %v, want the key given twice refused", err)
	}
}

func TestYAMLBoundsAliasExpansion(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want string
	}{
		// 10059 bytes of values, expanding to 100 MB: refused at the first
		// *b, which alone brings 1 MB.
		{"the reviewer's bomb", string(bomb(10000)),
			"YAML alias *b on line 5 expands the document to more than 1088812 bytes of values, the limit for one that holds 10059 (4 times as many, plus 1 MiB); use fewer aliases, or write the values out in full"},
		// 112 nodes, expanding to 10^9: refused in the fifth level, where
		// each *l3 brings 1111 nodes.
		{"billion laughs", string(billionLaughs()),
			"YAML alias *l3 on line 5 expands the document to more than 10448 nodes, the limit for one that holds 112 (4 times as many, plus 10000); use fewer aliases, or write the values out in full"},
		{"an alias in its own value", "a: 1\nb: &b [x, *b]\n",
			"YAML alias *b on line 2 is inside the value it names, so its expansion never ends; write the value out in full"},
		{"an alias deep in its own value", "b: &b\n  c:\n  - d: *b\n",
			"YAML alias *b on line 3 is inside the value it names, so its expansion never ends; write the value out in full"},
		{"a merge key that expands", "a: &a {k: " + strings.Repeat("x", 20000) + "}\nb: &b [" + strings.TrimSuffix(strings.Repeat("{<<: *a},", 60), ",") + "]\n",
			"YAML alias *a on line 2 expands the document to more than 1129068 bytes of values, the limit for one that holds 20123 "},
		{"an alias to an unknown anchor", "a: *nowhere\n", "unknown anchor 'nowhere' referenced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range converters {
				err := c.fn([]byte(tc.text))
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: got %v, want %q", c.name, err, tc.want)
				}
			}
		})
	}
}

// The bound is exactly 4 times what the text holds, plus 10000 nodes and
// 1 MiB of values: a document that expands to it is read, one past it is
// refused.
func TestYAMLExpansionBoundIsExact(t *testing.T) {
	// n aliases to a scalar of 1024 bytes: text "a: &a X...\nb: [*a, ...]",
	// which holds 1026 bytes of values and 6+n nodes.
	scalars := func(n int) []byte {
		return []byte("a: &a " + strings.Repeat("x", 1024) + "\nb: [" + strings.TrimSuffix(strings.Repeat("*a,", n), ",") + "]\n")
	}
	// Expanded: 1026 + 1024n bytes; the limit 4*1026 + 1 MiB.
	fits := (expansionFactor*1026 + extraBytes - 1026) / 1024
	// n aliases to a list of 9 values, after 1000 values written out:
	// 1017+n nodes in the text (the document, its mapping, three keys,
	// three lists, 1009 values, n aliases), 1017+10n expanded.
	lists := func(n int) []byte {
		return []byte("p: [" + strings.TrimSuffix(strings.Repeat("1,", 1000), ",") + "]\na: &a [1,1,1,1,1,1,1,1,1]\nb: [" + strings.TrimSuffix(strings.Repeat("*a,", n), ",") + "]\n")
	}
	// 1017 + 10n <= 4(1017+n) + 10000, so n <= (3*1017 + 10000)/6.
	listsFit := ((expansionFactor-1)*1017 + extraNodes) / (10 - expansionFactor)
	for _, tc := range []struct {
		name string
		text []byte
		want string // "" for read
	}{
		{"bytes at the limit", scalars(fits), ""},
		{"bytes past the limit", scalars(fits + 1), fmt.Sprintf("YAML alias *a on line 2 expands the document to more than %d bytes of values, the limit for one that holds 1026 ", expansionFactor*1026+extraBytes)},
		{"nodes at the limit", lists(listsFit), ""},
		{"nodes past the limit", lists(listsFit + 1), fmt.Sprintf("YAML alias *a on line 3 expands the document to more than %d nodes, the limit for one that holds %d ", expansionFactor*(1017+listsFit+1)+extraNodes, 1017+listsFit+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.text)
			if got := fmt.Sprint(err); (tc.want == "") != (err == nil) || !strings.Contains(got, tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// A refused document is refused from its text: the check parses a few
// kilobytes and counts, and allocates what that takes, a few hundred
// kilobytes, never the megabytes or gigabytes of the expansion.
func TestYAMLRefusalAllocatesLittle(t *testing.T) {
	for _, tc := range []struct {
		name string
		text []byte
	}{
		{"the reviewer's bomb (11 KB, 100 MB expanded)", bomb(10000)},
		{"billion laughs", billionLaughs()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := YAMLToJSON(tc.text)
			runtime.ReadMemStats(&after)
			if !Refused(err) {
				t.Fatalf("got %v, want it refused", err)
			}
			n := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes allocated to refuse %d bytes of text", n, len(tc.text))
			if n > 2<<20 {
				t.Errorf("%d bytes allocated to refuse %d bytes of text, want under 2 MiB", n, len(tc.text))
			}
		})
	}
}

func TestExpansionErrorIsTyped(t *testing.T) {
	_, err := YAMLToJSON(bomb(10000))
	var expansion *ExpansionError
	if !errors.As(err, &expansion) || !Refused(err) {
		t.Fatalf("got %v, want an *ExpansionError", err)
	}
	want := ExpansionError{Line: 5, Name: "b", Unit: "bytes", Limit: 4*10059 + 1<<20, Own: 10059}
	if diff := cmp.Diff(want, *expansion); diff != "" {
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
