package textdiff

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUnified(t *testing.T) {
	for _, tc := range []struct{ name, a, b, want string }{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"change in the middle", "a\nb\nc\nd\ne\nf\ng\nh\n", "a\nb\nc\nd\nE\nf\ng\nh\n",
			"--- old\n+++ new\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"},
		{"append", "a\n", "a\nb\n", "--- old\n+++ new\n@@ -1 +1,2 @@\n a\n+b\n"},
		{"from empty", "", "a\n", "--- old\n+++ new\n@@ -0,0 +1 @@\n+a\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Unified("old", "new", []byte(tc.a), []byte(tc.b))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
