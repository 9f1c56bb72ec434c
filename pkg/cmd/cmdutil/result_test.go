package cmdutil

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUnifiedDiff(t *testing.T) {
	for _, tc := range []struct{ name, a, b, want string }{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"change in the middle", "a\nb\nc\nd\ne\nf\ng\nh\n", "a\nb\nc\nd\nE\nf\ng\nh\n",
			"--- old\n+++ new\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"},
		{"append", "a\n", "a\nb\n", "--- old\n+++ new\n@@ -1 +1,2 @@\n a\n+b\n"},
		{"from empty", "", "a\n", "--- old\n+++ new\n@@ -0,0 +1 @@\n+a\n"},
		// The hand-written diff printed only the headers here.
		{"only the final newline differs", "a\nb", "a\nb\n",
			"--- old\n+++ new\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := UnifiedDiff("old", "new", []byte(tc.a), []byte(tc.b))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkDiffLargeDocuments diffs two unrelated 20,000-line documents, the
// worst case of a restore. The hand-written quadratic table needed about
// 3 GB here; run with -benchmem to see the figure now.
func BenchmarkDiffLargeDocuments(b *testing.B) {
	var x, y strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&x, "- name: a%d\n  value: \"%d\"\n", i, i%7)
		fmt.Fprintf(&y, "- name: b%d\n  value: \"%d\"\n", i, i%5)
	}
	before, after := []byte(x.String()), []byte(y.String())
	for b.Loop() {
		_ = UnifiedDiff("old", "new", before, after)
	}
}
