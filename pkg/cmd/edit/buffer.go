package edit

import (
	"bytes"
	"fmt"
	"strings"
)

// The file the editor opens: a comment block on top, the user's text below.

// header is the comment block at the top of the file, with notes (problems
// or a conflict) after it.
func (s *editSession) header(notes []string) []byte {
	t := s.o.engine.Target()
	var b strings.Builder
	for _, line := range []string{
		"Edit the ClusterConfiguration below and save to write it back. Lines",
		"starting with '#' are ignored; an empty file, or one saved unchanged,",
		"cancels the edit. The result is validated as kubeadm validates it, and",
		"a change made on the server meanwhile is merged, never overwritten.",
		"",
		"server: " + s.o.server,
		fmt.Sprintf("configmap: %s/%s, key %s", t.Namespace, t.Name, t.Key),
		"resourceVersion: " + s.rv,
		"",
	} {
		writeComment(&b, line)
	}
	for _, line := range notes {
		writeComment(&b, line)
	}
	if len(notes) > 0 {
		writeComment(&b, "")
	}
	return []byte(b.String())
}

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
// ignores them.
func stripComments(text []byte) []byte {
	var out [][]byte
	for _, line := range bytes.SplitAfter(text, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line)
		}
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
