package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Citations of the guides outside Markdown: a message that tells an
// operator to read docs/agent.md ("Renewing the agent's credentials") is a
// link too, and one that names a heading the guide no longer has leaves
// the operator looking for it.

// sourceDirs are where citations are looked for: the Go sources of the
// plugin and its tools (*.go), and every file operators apply (deploy/,
// its Markdown aside, which check reads as Markdown).
var sourceDirs = []string{"cmd", "pkg", "internal", "hack", "deploy"}

// skipDirs are not looked in: test inputs, and this command, whose tests
// cite guides that do not exist on purpose.
var skipDirs = map[string]bool{"testdata": true, "hack/checklinks": true}

// sourceFiles lists the files under sourceDirs whose citations are
// checked, relative to root, sorted.
func sourceFiles(root string) ([]string, error) {
	var files []string
	for _, dir := range sourceDirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			switch {
			case d.IsDir() && (skipDirs[rel] || skipDirs[d.Name()]):
				return filepath.SkipDir
			case d.IsDir():
				return nil
			case dir == "deploy" && !strings.HasSuffix(d.Name(), ".md"), strings.HasSuffix(d.Name(), ".go"):
				files = append(files, rel)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read %s: %w", dir, err)
		}
	}
	sort.Strings(files)
	return files, nil
}

// citation is a guide cited on a line: its path under the root, and the
// anchor or the headings named with it (none: the guide as a whole).
type citation struct {
	line     int
	path     string
	anchor   string
	headings []string
}

// String is the citation as the report shows it.
func (c citation) String() string {
	switch {
	case c.anchor != "":
		return c.path + "#" + c.anchor
	case len(c.headings) > 0:
		return c.path + ` ("` + strings.Join(c.headings, `", "`) + `")`
	}
	return c.path
}

var (
	// guideRE finds a guide: docs/... .md, as a path from the root.
	guideRE = regexp.MustCompile(`docs/[A-Za-z0-9_./-]+\.md`)
	// anchorRE reads the anchor right after a guide's path.
	anchorRE = regexp.MustCompile(`^#([A-Za-z0-9_-]+)`)
	// headingsRE reads the headings quoted right after a guide's path:
	// ` ("A", "B")`, `, "A"`, ` says ("A")`.
	headingsRE = regexp.MustCompile(`^(?:\s+says)?(?:\s*\(\s*|\s*,\s*)("[^"]+"(?:\s*,\s*"[^"]+")*)`)
	quotedRE   = regexp.MustCompile(`"([^"]+)"`)
	// continuationRE is what starts a line that goes on with a comment or
	// a string of the line before.
	continuationRE = regexp.MustCompile(`^\s*(?://|#)?\s*`)
)

// readCitations returns the guides cited in a file, with what each names
// of its guide. A Go string's escaped quotes count as quotes, and a quoted
// heading may end on the next line.
func readCitations(file string) ([]citation, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.ReplaceAll(string(data), `\"`, `"`), "\n")
	var out []citation
	for i, line := range lines {
		next := ""
		if i+1 < len(lines) {
			next = " " + continuationRE.ReplaceAllString(lines[i+1], "")
		}
		for _, m := range guideRE.FindAllStringIndex(line, -1) {
			c := citation{line: i + 1, path: line[m[0]:m[1]]}
			rest := line[m[1]:]
			if a := anchorRE.FindStringSubmatch(rest); a != nil {
				c.anchor = a[1]
			} else if h := headingsRE.FindStringSubmatch(rest + next); h != nil {
				for _, q := range quotedRE.FindAllStringSubmatch(h[1], -1) {
					c.headings = append(c.headings, q[1])
				}
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// resolveCitation says why c does not resolve, or "" when it does.
func resolveCitation(root string, c citation, anchors map[string]map[string]bool) string {
	full := filepath.Join(root, filepath.FromSlash(c.path))
	if _, err := os.Stat(full); err != nil {
		return "no such file"
	}
	if c.anchor == "" && len(c.headings) == 0 {
		return ""
	}
	if _, ok := anchors[c.path]; !ok {
		a, err := readAnchors(full)
		if err != nil {
			return "cannot read it: " + err.Error()
		}
		anchors[c.path] = a
	}
	if c.anchor != "" && !anchors[c.path][c.anchor] {
		return "no heading with this anchor in " + c.path
	}
	var missing []string
	for _, h := range c.headings {
		if !anchors[c.path][slug(h)] {
			missing = append(missing, fmt.Sprintf("%q", h))
		}
	}
	if len(missing) > 0 {
		return "no heading " + strings.Join(missing, ", ") + " in " + c.path
	}
	return ""
}
