package clusterconfig

import (
	"strconv"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Step is one element of a field path: a map key, a list index, or the
// append position [+].
type Step struct {
	Key    string
	Index  int
	IsList bool // Index or Append
	Append bool
}

func (s Step) String() string {
	switch {
	case s.Append:
		return "[+]"
	case s.IsList:
		return "[" + strconv.Itoa(s.Index) + "]"
	case strings.ContainsAny(s.Key, `.[]"'\`) || s.Key == "":
		return `["` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s.Key) + `"]`
	}
	return s.Key
}

// Path is a parsed field path such as apiServer.certSANs[0] or
// featureGates["A.B"].
type Path []Step

func (p Path) String() string {
	var b strings.Builder
	for i, s := range p {
		if i > 0 && !s.IsList && !strings.HasPrefix(s.String(), "[") {
			b.WriteByte('.')
		}
		b.WriteString(s.String())
	}
	return b.String()
}

// ParsePath parses the plugin's path syntax: dotted keys, [N] list indexes,
// [+] to append, and ["key.with.dots"] (or single quotes) for keys that
// contain dots or brackets.
func ParsePath(s string) (Path, error) {
	bad := func(why string) (Path, error) {
		return nil, exitcode.Usagef("bad path %q: %s", s, why)
	}
	if s == "" {
		return bad("empty path")
	}
	var p Path
	i := 0
	expectKey := true
	for i < len(s) {
		switch c := s[i]; c {
		case '[':
			end, step, err := parseBracket(s, i)
			if err != "" {
				return bad(err)
			}
			p = append(p, step)
			i = end
			expectKey = false
		case '.':
			if expectKey {
				return bad("empty key")
			}
			i++
			expectKey = true
			if i == len(s) {
				return bad("path ends with '.'")
			}
		case ']':
			return bad("unexpected ']'")
		default:
			if !expectKey {
				return bad("expected '.' or '[' after ']'")
			}
			j := i
			for j < len(s) && s[j] != '.' && s[j] != '[' && s[j] != ']' {
				j++
			}
			p = append(p, Step{Key: s[i:j]})
			i = j
			expectKey = false
		}
	}
	if p[0].IsList {
		return bad("a path starts with a key")
	}
	return p, nil
}

// parseBracket parses [N], [+], ["key"] or ['key'] starting at s[i] == '['.
func parseBracket(s string, i int) (int, Step, string) {
	i++
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		quote := s[i]
		var key strings.Builder
		for i++; i < len(s); i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				key.WriteByte(s[i])
				continue
			}
			if s[i] == quote {
				break
			}
			key.WriteByte(s[i])
		}
		if i+1 >= len(s) || s[i+1] != ']' {
			return 0, Step{}, "unterminated quoted key"
		}
		return i + 2, Step{Key: key.String()}, ""
	}
	end := strings.IndexByte(s[i:], ']')
	if end < 0 {
		return 0, Step{}, "missing ']'"
	}
	inner := s[i : i+end]
	if inner == "+" {
		return i + end + 1, Step{IsList: true, Append: true}, ""
	}
	n, err := strconv.Atoi(inner) // digits only: no sign, as kubeadm reads numbers
	if err != nil || strings.Trim(inner, "0123456789") != "" {
		return 0, Step{}, "list index must be a number >= 0 or + to append, not " + strconv.Quote(inner)
	}
	return i + end + 1, Step{IsList: true, Index: n}, ""
}
