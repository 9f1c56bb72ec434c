package cmdutil

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Files and stdin are read up to 2 MiB (internal/input.MaxBytes); more is
// an input the plugin refuses (exit 3), found out without reading on.
func TestReadInputIsBounded(t *testing.T) {
	dir := t.TempDir()
	file := func(n int) string {
		path := filepath.Join(dir, "f")
		if err := os.WriteFile(path, bytes.Repeat([]byte{'#'}, n), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const tooLarge = " is larger than 2 MiB, the limit for any input (twice what a ConfigMap holds)"
	for _, tc := range []struct {
		name  string
		arg   func() string
		stdin int
		want  string // "" for accepted
		code  exitcode.Code
	}{
		{"a file of 2 MiB", func() string { return file(2 << 20) }, 0, "", exitcode.OK},
		{"a file of 2 MiB and 1 byte", func() string { return file(2<<20 + 1) }, 0, "the config file " + filepath.Join(dir, "f") + tooLarge, exitcode.Invalid},
		{"stdin of 2 MiB", func() string { return "-" }, 2 << 20, "", exitcode.OK},
		{"stdin of 2 MiB and 1 byte", func() string { return "-" }, 2<<20 + 1, "the config file on stdin" + tooLarge, exitcode.Invalid},
		{"a missing file", func() string { return filepath.Join(dir, "missing") }, 0,
			"cannot read the config file: open " + filepath.Join(dir, "missing") + ": no such file or directory", exitcode.Usage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := ReadInput(tc.arg(), "the config file", bytes.NewReader(bytes.Repeat([]byte{'#'}, tc.stdin)))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want || exitcode.FromError(err) != tc.code {
				t.Fatalf("got %q (exit %d), want %q (exit %d)", got, exitcode.FromError(err), tc.want, tc.code)
			}
			if err == nil && len(data) != 2<<20 {
				t.Errorf("read %d bytes, want all %d", len(data), 2<<20)
			}
		})
	}
}
