package unitfile

import (
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
