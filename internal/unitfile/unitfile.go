// Package unitfile reads systemd unit files as systemd does, for the tests
// of the agent's systemd unit (deploy/kubeadmcfg-agent.service) and its
// drop-ins (deploy/kubeadmcfg-agent.service.d): they check its directives and
// run its command lines as written. Only what those files use is read:
// sections, comments, directives given more than once, lines continued with
// a backslash, drop-ins that add to the unit or reset its lists, and
// command lines split on white space and quotes. A command line with what
// systemd would replace ($VAR, %-specifiers) or an escape it reads
// otherwise is refused, so that what the tests run is what systemd runs.
package unitfile

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
)

// Unit is a parsed unit file: every assignment of every directive, by
// section, in order.
type Unit struct {
	sections map[string]map[string][]string
}

// Read parses the unit file at path and then its drop-ins, in order, as
// systemd reads a unit with the .conf files of its NAME.service.d: each
// drop-in's assignments come after the unit's, so a drop-in adds to a list
// or, with an empty assignment, resets it, and its single values win.
func Read(path string, dropIns ...string) (*Unit, error) {
	var u *Unit
	for _, p := range append([]string{path}, dropIns...) {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		next, err := Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if u == nil {
			u = next
			continue
		}
		for section, keys := range next.sections {
			if u.sections[section] == nil {
				u.sections[section] = map[string][]string{}
			}
			for key, values := range keys {
				u.sections[section][key] = append(u.sections[section][key], values...)
			}
		}
	}
	return u, nil
}

// Parse parses a unit file.
func Parse(data []byte) (*Unit, error) {
	u := &Unit{sections: map[string]map[string][]string{}}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	var cont strings.Builder
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if cont.Len() == 0 && (line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";")) {
			continue
		}
		if cont.Len() > 0 && (strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";")) {
			continue // systemd skips comments inside a continued line
		}
		if rest, ok := strings.CutSuffix(line, `\`); ok {
			cont.WriteString(rest + " ")
			continue
		}
		line = cont.String() + line
		cont.Reset()
		if strings.HasPrefix(line, "[") {
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("line %d: a section header without ]", n)
			}
			section = line[1 : len(line)-1]
			if u.sections[section] == nil {
				u.sections[section] = map[string][]string{}
			}
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			return nil, fmt.Errorf("line %d: want Key=Value in a section, got %q", n, line)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if strings.HasPrefix(key, "Exec") {
			if _, err := split(value); err != nil {
				return nil, fmt.Errorf("line %d: %s=: %w", n, key, err)
			}
		}
		u.sections[section][key] = append(u.sections[section][key], value)
	}
	if cont.Len() > 0 {
		return nil, fmt.Errorf("the last line is continued")
	}
	return u, sc.Err()
}

// Values is every assignment of key in section, in order, as systemd adds
// them up for a list: an empty assignment drops those before it.
func (u *Unit) Values(section, key string) []string {
	var out []string
	for _, v := range u.sections[section][key] {
		if v == "" {
			out = nil
			continue
		}
		out = append(out, v)
	}
	return out
}

// Value is the last assignment of key in section: the one systemd uses for
// a single value. ok is false when there is none.
func (u *Unit) Value(section, key string) (value string, ok bool) {
	vs := u.sections[section][key]
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// Words is every word of every assignment of key in section: the paths of
// BindPaths=, the capabilities of CapabilityBoundingSet=, ...
func (u *Unit) Words(section, key string) []string {
	var out []string
	for _, v := range u.Values(section, key) {
		out = append(out, strings.Fields(v)...)
	}
	return out
}

// Command splits a command line of ExecStart= and its kind into the
// executable and its arguments, as systemd does (words apart on white
// space, quotes around a word or part of one), and returns the prefixes
// systemd reads before the executable ("+", "-", "@", "!", ":"). Parse has
// refused the lines of a unit it cannot split.
func Command(line string) (prefixes string, argv []string) {
	argv, err := split(line)
	if err != nil || len(argv) == 0 {
		return "", nil
	}
	exe := argv[0]
	for exe != "" && strings.ContainsRune("+-@!:", rune(exe[0])) {
		prefixes += exe[:1]
		exe = exe[1:]
	}
	argv[0] = exe
	return prefixes, argv
}

// Flag is the value of the last --name of a command line, given as
// "--name value" or "--name=value", as pflag reads it; ok is false when the
// flag is not there.
func Flag(argv []string, name string) (value string, ok bool) {
	for i := 0; i < len(argv); i++ {
		switch {
		case argv[i] == "--"+name && i+1 < len(argv):
			value, ok = argv[i+1], true
			i++
		case strings.HasPrefix(argv[i], "--"+name+"="):
			value, ok = strings.TrimPrefix(argv[i], "--"+name+"="), true
		}
	}
	return value, ok
}

// split splits a command line into words as systemd does for ExecStart=:
// white space apart, single or double quotes keep white space in a word,
// and a backslash takes the next quote, backslash or blank literally. It
// refuses what systemd would change before it runs the line ($VAR and
// %-specifiers) and other escapes, which it reads as C escapes.
func split(line string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord, quote := false, rune(0)
	runes := []rune(line)
	for i := 0; i < len(runes); i++ {
		r := runes[i]
		switch {
		case r == '\\':
			if i+1 == len(runes) || !strings.ContainsRune(`"'\ `, runes[i+1]) {
				return nil, fmt.Errorf("an escape other than \\\\, \\\", \\' or \\ (blank) in %q", line)
			}
			i++
			word.WriteRune(runes[i])
			inWord = true
		case r == '$' || r == '%':
			return nil, fmt.Errorf("%q holds %c, which systemd would replace (a variable or a specifier)", line, r)
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			word.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("an unterminated %c in %q", quote, line)
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}
