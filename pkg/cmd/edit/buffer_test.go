package edit

import "testing"

func TestEditBufferHelpers(t *testing.T) {
	text := []byte("# header\n  # indented\n#\n\napiVersion: v # not a comment line\nkind: K\n# trailing\n")
	if got, want := string(stripComments(text)), "\napiVersion: v # not a comment line\nkind: K\n"; got != want {
		t.Errorf("stripComments = %q, want %q", got, want)
	}
	if got, want := string(blankComments(text)), "\n\n\n\napiVersion: v # not a comment line\nkind: K\n\n"; got != want {
		t.Errorf("blankComments = %q, want %q", got, want)
	}
	if got, want := string(userText(text)), "apiVersion: v # not a comment line\nkind: K\n# trailing\n"; got != want {
		t.Errorf("userText = %q, want %q", got, want)
	}
}
