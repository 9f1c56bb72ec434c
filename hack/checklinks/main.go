// Command checklinks fails when a relative link in README.md or in a
// Markdown file under docs/ or deploy/ points at a file that does not exist,
// or at a heading its target does not have, so that moving or renaming a
// guide cannot leave a reader on a dead link. `make verify` runs it.
//
//	go run ./hack/checklinks [-root DIR]
//
// Links with a scheme (https:, mailto:, ...) are not checked. A link to
// file.md#anchor, or to #anchor of the same file, is checked against the
// file's headings, named as GitHub names them.
//
// The guides are also cited outside Markdown: by the plugin's messages and
// help, its comments, and the files operators apply. Every citation of a
// guide in the Go sources and in deploy/, docs/X.md#anchor or docs/X.md
// followed by its headings in quotes (docs/agent.md ("The alarm"),
// docs/agent.md, "The image"; a quote may go on in the next line's
// comment), must name a file and headings it has.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

func main() {
	root := flag.String("root", ".", "the repository root, holding README.md, docs/ and deploy/")
	flag.Parse()
	broken, err := check(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "checklinks:", err)
		os.Exit(1)
	}
	for _, b := range broken {
		fmt.Fprintln(os.Stderr, b)
	}
	if len(broken) > 0 {
		fmt.Fprintf(os.Stderr, "checklinks: %d broken links: fix each link or the file it points at\n", len(broken))
		os.Exit(1)
	}
}

// brokenLink is one link whose target is missing, printed as
// file:line: target (why).
type brokenLink struct {
	file   string // relative to the root, with forward slashes
	line   int
	target string // as written in the link
	why    string
}

func (b brokenLink) String() string {
	return fmt.Sprintf("%s:%d: %s (%s)", b.file, b.line, b.target, b.why)
}

// link is a link target as written, and the line it is on.
type link struct {
	line   int
	target string
}

// check reads README.md, docs/**/*.md and deploy/**/*.md under root and
// returns every relative link that does not resolve, in file and line
// order, then every citation of a guide in the sources (sourceFiles) that
// does not.
func check(root string) ([]brokenLink, error) {
	files, err := markdownFiles(root)
	if err != nil {
		return nil, err
	}
	anchors := map[string]map[string]bool{} // target file -> its anchors
	var broken []brokenLink
	for _, file := range files {
		links, err := readLinks(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			return nil, err
		}
		for _, l := range links {
			if why := resolve(root, file, l.target, anchors); why != "" {
				broken = append(broken, brokenLink{file: file, line: l.line, target: l.target, why: why})
			}
		}
	}
	sources, err := sourceFiles(root)
	if err != nil {
		return nil, err
	}
	for _, file := range sources {
		cites, err := readCitations(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			return nil, err
		}
		for _, c := range cites {
			if why := resolveCitation(root, c, anchors); why != "" {
				broken = append(broken, brokenLink{file: file, line: c.line, target: c.String(), why: why})
			}
		}
	}
	return broken, nil
}

// mdDirs are the directories whose Markdown files are checked besides
// README.md: the guides, and what operators apply.
var mdDirs = []string{"docs", "deploy"}

// markdownFiles lists README.md and every .md file under mdDirs, relative
// to root, sorted.
func markdownFiles(root string) ([]string, error) {
	files := []string{"README.md"}
	if _, err := os.Stat(filepath.Join(root, "README.md")); err != nil {
		return nil, fmt.Errorf("no README.md in %s (run from the repository root, or give -root): %w", root, err)
	}
	for _, dir := range mdDirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
				rel, err := filepath.Rel(root, p)
				if err != nil {
					return err
				}
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read %s: %w", dir, err)
		}
	}
	sort.Strings(files[1:])
	return files, nil
}

// schemeRE matches a link with a scheme (https:, mailto:, ...), which is not
// a file of the repository.
var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// resolve says why target, linked from file, does not resolve, or "" when
// it does or is not a relative link.
func resolve(root, file, target string, anchors map[string]map[string]bool) string {
	if target == "" || target == "#" || strings.HasPrefix(target, "//") || schemeRE.MatchString(target) {
		return ""
	}
	if strings.HasPrefix(target, "#") { // a heading of the same file
		target = path.Base(file) + target
	}
	rel, fragment, _ := strings.Cut(target, "#")
	rel, _, _ = strings.Cut(rel, "?")
	unescaped, err := url.PathUnescape(rel)
	if err != nil {
		return "cannot decode the path"
	}
	var p string // relative to root, slash-separated
	if strings.HasPrefix(unescaped, "/") {
		p = path.Clean(strings.TrimPrefix(unescaped, "/"))
	} else {
		p = path.Join(path.Dir(file), unescaped)
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return "outside the repository"
	}
	full := filepath.Join(root, filepath.FromSlash(p))
	info, err := os.Stat(full)
	if err != nil {
		return "no such file"
	}
	if fragment == "" || info.IsDir() || !strings.HasSuffix(strings.ToLower(p), ".md") {
		return ""
	}
	want, err := url.PathUnescape(fragment)
	if err != nil {
		return "cannot decode the anchor"
	}
	if _, ok := anchors[p]; !ok {
		a, err := readAnchors(full)
		if err != nil {
			return "cannot read it: " + err.Error()
		}
		anchors[p] = a
	}
	if !anchors[p][want] {
		return "no heading with this anchor in " + p
	}
	return ""
}

// readLinks returns the targets of the inline links, images and link
// reference definitions of a Markdown file, outside code blocks and code
// spans.
func readLinks(file string) ([]link, error) {
	var links []link
	err := eachLine(file, func(n int, line string) {
		line = stripCodeSpans(line)
		if m := refDefRE.FindStringSubmatch(line); m != nil {
			links = append(links, link{line: n, target: strings.Trim(m[1], "<>")})
			return
		}
		for rest := line; ; {
			i := strings.Index(rest, "](")
			if i < 0 {
				break
			}
			rest = rest[i+2:]
			if target, ok := inlineTarget(rest); ok {
				links = append(links, link{line: n, target: target})
			}
		}
	})
	return links, err
}

// refDefRE matches a link reference definition: [label]: target.
var refDefRE = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(\S+)`)

// inlineTarget reads the destination at the start of s, the text after
// "](": <anything but '>'>, or up to whitespace or the ')' that closes it.
func inlineTarget(s string) (string, bool) {
	s = strings.TrimLeft(s, " \t")
	if strings.HasPrefix(s, "<") {
		end := strings.IndexByte(s, '>')
		return s[1:max(end, 1)], end > 0
	}
	depth := 0
	for i, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth == 0:
			return s[:i], true
		case r == ')':
			depth--
		case r == ' ' || r == '\t':
			return s[:i], true
		}
	}
	return "", false
}

// stripCodeSpans blanks `code spans`, whose brackets are not links.
func stripCodeSpans(line string) string {
	var b strings.Builder
	for {
		start := strings.IndexByte(line, '`')
		if start < 0 {
			b.WriteString(line)
			return b.String()
		}
		run := len(line[start:]) - len(strings.TrimLeft(line[start:], "`"))
		fence := line[start : start+run]
		end := strings.Index(line[start+run:], fence)
		if end < 0 { // an unmatched backtick is text
			b.WriteString(line[:start+run])
			line = line[start+run:]
			continue
		}
		b.WriteString(line[:start])
		line = line[start+run+end+run:]
	}
}

// headingRE matches an ATX heading; the closing #s are removed apart.
var headingRE = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)

// htmlAnchorRE matches an explicit anchor: <a name="x"> or <a id="x">.
var htmlAnchorRE = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)

// readAnchors returns the anchors GitHub gives the headings of a Markdown
// file (a repeated heading gets -1, -2, ...), and any explicit HTML anchors.
func readAnchors(file string) (map[string]bool, error) {
	anchors := map[string]bool{}
	seen := map[string]int{}
	err := eachLine(file, func(_ int, line string) {
		for _, m := range htmlAnchorRE.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			return
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			anchors[s+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	})
	return anchors, err
}

// mdLinkRE and htmlTagRE find the markup a heading's text loses when
// GitHub renders it.
var (
	mdLinkRE  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTagRE = regexp.MustCompile(`<[^>]+>`)
)

// slug is GitHub's anchor for a heading: the rendered text, lowercased,
// each space a '-', and punctuation other than '-' and '_' dropped.
func slug(heading string) string {
	text := mdLinkRE.ReplaceAllString(heading, "$1")
	text = htmlTagRE.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.TrimSpace(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.M, r):
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// eachLine calls fn with each line of a Markdown file that is not inside a
// fenced code block, numbered from 1.
func eachLine(file string, fn func(n int, line string)) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	fence := "" // the open fence, "" outside code
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if indent := len(line) - len(trimmed); indent <= 3 {
			if marker := fenceOf(trimmed); marker != "" {
				switch {
				case fence == "":
					fence = marker
					continue
				case marker[0] == fence[0] && len(marker) >= len(fence) && strings.TrimSpace(trimmed[len(marker):]) == "":
					fence = ""
					continue
				}
			}
		}
		if fence == "" {
			fn(n, line)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	return nil
}

// fenceOf returns the ``` or ~~~ run (three or more) a line starts with.
func fenceOf(line string) string {
	for _, c := range []string{"`", "~"} {
		run := len(line) - len(strings.TrimLeft(line, c))
		if run >= 3 {
			return line[:run]
		}
	}
	return ""
}
