// Package unitfile reads systemd unit files as systemd does, for the tests
// of the agent's systemd unit (hack/kubeadmcfg-agent.service): they check its
// directives and run its command lines as written. Only what those files
// use is read: sections, comments, directives given more than once, lines
// continued with a backslash, and command lines split on white space.
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

// Read parses the unit file at path.
func Read(path string) (*Unit, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	u, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
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
		key = strings.TrimSpace(key)
		u.sections[section][key] = append(u.sections[section][key], strings.TrimSpace(value))
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
// executable and its arguments, and returns the prefixes systemd reads
// before the executable ("+", "-", "@", "!", ":").
func Command(line string) (prefixes string, argv []string) {
	argv = strings.Fields(line)
	if len(argv) == 0 {
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
