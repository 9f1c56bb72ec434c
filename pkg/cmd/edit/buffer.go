package edit

import (
	"bytes"
	"strings"
)

// The text of the file the editor opens: comment lines, written and read
// back.

// writeComment writes text as comment lines; a text of several lines keeps
// them all commented.
func writeComment(b *strings.Builder, text string) {
	for i, line := range strings.Split(text, "\n") {
		switch {
		case line == "" && i == 0:
			b.WriteString("#\n")
		case i == 0:
			b.WriteString("# " + line + "\n")
		default:
			b.WriteString("#   " + line + "\n")
		}
	}
}

// stripComments drops the lines that start with '#', as kubectl edit
// ignores them: what is left is what the user changed, or not.
func stripComments(text []byte) []byte {
	return commentLines(text, nil)
}

// blankComments empties the lines that start with '#' and keeps every
// line where it was, so that a parse error names the line of the file the
// editor showed.
func blankComments(text []byte) []byte {
	return commentLines(text, []byte("\n"))
}

// commentLines replaces every line that starts with '#' by with.
func commentLines(text, with []byte) []byte {
	var out [][]byte
	for _, line := range bytes.SplitAfter(text, []byte("\n")) {
		if bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			line = with
		}
		out = append(out, line)
	}
	return bytes.Join(out, nil)
}

// userText is the edited file without the comment block at its top (the
// header and the problems of the last round), so that a new header can
// take its place.
func userText(text []byte) []byte {
	for len(text) > 0 {
		line, rest, _ := bytes.Cut(text, []byte("\n"))
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) > 0 && trimmed[0] != '#' {
			break
		}
		text = rest
	}
	return text
}
