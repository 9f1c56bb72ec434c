package unitfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	u, err := Parse([]byte(`# a comment
[Unit]
Description=a unit

[Service]
ExecStartPre=+/usr/bin/install -d /a
ExecStart=/bin/agent \
  --wait 2m \
# a comment inside the command line
  --stop-grace=1m
BindPaths=/a /b
BindPaths=/c
ReadWritePaths=/x
ReadWritePaths=
ReadWritePaths=/y
`))
	if err != nil {
		t.Fatal(err)
	}
	start, _ := u.Value("Service", "ExecStart")
	prefixes, argv := Command(start)
	if diff := cmp.Diff([]string{"/bin/agent", "--wait", "2m", "--stop-grace=1m"}, argv); diff != "" || prefixes != "" {
		t.Errorf("ExecStart (-want +got):\n%s(prefixes %q)", diff, prefixes)
	}
	pre, _ := u.Value("Service", "ExecStartPre")
	if prefixes, argv := Command(pre); prefixes != "+" || argv[0] != "/usr/bin/install" {
		t.Errorf("ExecStartPre: %q %q", prefixes, argv)
	}
	if diff := cmp.Diff([]string{"/a", "/b", "/c"}, u.Words("Service", "BindPaths")); diff != "" {
		t.Errorf("BindPaths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/y"}, u.Values("Service", "ReadWritePaths")); diff != "" {
		t.Errorf("an empty assignment resets the list (-want +got):\n%s", diff)
	}
	for name, want := range map[string]string{"wait": "2m", "stop-grace": "1m"} {
		if got, ok := Flag(argv, name); !ok || got != want {
			t.Errorf("--%s = %q (%v), want %q", name, got, ok, want)
		}
	}
	if _, ok := Flag(argv, "kubeconfig"); ok {
		t.Error("--kubeconfig found in a command line without it")
	}
	if _, err := Parse([]byte("Key=value\n")); err == nil {
		t.Error("a directive outside a section was accepted")
	}
}

func TestCommandQuotes(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{`/bin/agent --restart "systemd-run --wait /sbin/x" --wait 2m`, []string{"/bin/agent", "--restart", "systemd-run --wait /sbin/x", "--wait", "2m"}},
		{`/bin/a 'one  two' --x="a b"c`, []string{"/bin/a", "one  two", "--x=a bc"}},
		{`/bin/a \"not\ quoted\" ""`, []string{"/bin/a", `"not quoted"`, ""}},
	} {
		if _, got := Command(tc.line); !cmp.Equal(tc.want, got) {
			t.Errorf("Command(%s) = %q, want %q", tc.line, got, tc.want)
		}
	}
	// What systemd reads otherwise than a test would is refused when the
	// unit is read.
	for line, want := range map[string]string{
		`/bin/a "open`:                       `an unterminated " in`,
		`/bin/a $KUBEADMCFG_KUBELET_VERSION`: `holds $, which systemd would replace`,
		`/bin/a --node %H`:                   `holds %, which systemd would replace`,
		`/bin/a a\nb`:                        `an escape other than`,
	} {
		_, err := Parse([]byte("[Service]\nExecStart=" + line + "\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ExecStart=%s: %v, want an error saying %q", line, err, want)
		}
	}
}

// TestReadDropIns: a drop-in's assignments come after the unit's, as
// systemd merges NAME.service.d/*.conf: lists grow or are reset by an
// empty assignment, single values are the drop-in's.
func TestReadDropIns(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := write("a.service", "[Service]\nExecStart=/bin/a --x\nBindPaths=/a\nReadWritePaths=/a\nTimeoutStopSec=1min\n")
	first := write("1.conf", "[Service]\nExecStart=\nExecStart=/bin/a --x --y\nBindPaths=\nReadWritePaths=/b\n[Unit]\nDescription=more\n")
	second := write("2.conf", "[Service]\nTimeoutStopSec=2min\n")
	u, err := Read(base, first, second)
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Values("Service", "ExecStart"); !cmp.Equal([]string{"/bin/a --x --y"}, got) {
		t.Errorf("ExecStart = %q, want the drop-in's alone", got)
	}
	if got := u.Values("Service", "BindPaths"); len(got) != 0 {
		t.Errorf("BindPaths = %q, want it reset", got)
	}
	if got := u.Words("Service", "ReadWritePaths"); !cmp.Equal([]string{"/a", "/b"}, got) {
		t.Errorf("ReadWritePaths = %q, want both", got)
	}
	if got, _ := u.Value("Service", "TimeoutStopSec"); got != "2min" {
		t.Errorf("TimeoutStopSec = %s, want the last drop-in's", got)
	}
	if got, _ := u.Value("Unit", "Description"); got != "more" {
		t.Errorf("a section only the drop-in has: %q", got)
	}
	if _, err := Read(base, filepath.Join(dir, "missing.conf")); err == nil {
		t.Error("a missing drop-in was read")
	}
}
