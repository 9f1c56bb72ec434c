// Package textdiff renders the unified diff between two small texts, such as
// two versions of a ClusterConfiguration, without calling an external diff.
package textdiff

import (
	"fmt"
	"strings"
)

const context = 3

// Unified returns the unified diff of a and b with the given file labels,
// or "" when they are equal.
func Unified(aName, bName string, a, b []byte) string {
	if string(a) == string(b) {
		return ""
	}
	x, y := lines(a), lines(b)
	ops := diff(x, y)

	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	for start := 0; start < len(ops); {
		// Find the next change, then grow the hunk while changes are close.
		for start < len(ops) && ops[start].kind == ' ' {
			start++
		}
		if start == len(ops) {
			break
		}
		lo := max(start-context, 0)
		hi := start
		for i := start; i < len(ops); i++ {
			if ops[i].kind != ' ' {
				hi = i
			} else if i-hi > 2*context {
				break
			}
		}
		hi = min(hi+context+1, len(ops))
		aStart, bStart, aLen, bLen := ops[lo].ai, ops[lo].bi, 0, 0
		for _, op := range ops[lo:hi] {
			if op.kind != '+' {
				aLen++
			}
			if op.kind != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", span(aStart, aLen), span(bStart, bLen))
		for _, op := range ops[lo:hi] {
			out.WriteByte(op.kind)
			out.WriteString(op.text)
			out.WriteByte('\n')
		}
		start = hi
	}
	return out.String()
}

func span(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func lines(s []byte) []string {
	if len(s) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(s), "\n"), "\n")
}

type op struct {
	kind   byte // ' ', '-', '+'
	text   string
	ai, bi int // line indexes in a and b where this op starts
}

// diff computes an edit script from the longest common subsequence; the
// documents are small, so the quadratic table is fine.
func diff(a, b []string) []op {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []op
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, op{' ', a[i], i, j})
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', a[i], i, j})
			i++
		default:
			ops = append(ops, op{'+', b[j], i, j})
			j++
		}
	}
	return ops
}
