package cmdutil

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEditorFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		goos string
		want Editor
	}{
		{"default", nil, "linux", Editor{Args: []string{"vi"}}},
		{"default on windows", nil, "windows", Editor{Args: []string{"notepad"}, Windows: true}},
		{"EDITOR", map[string]string{"EDITOR": "nano"}, "linux", Editor{Args: []string{"nano"}}},
		{"KUBE_EDITOR wins", map[string]string{"EDITOR": "nano", "KUBE_EDITOR": "emacs -nw"}, "linux",
			Editor{Args: []string{"emacs", "-nw"}}},
		{"blank KUBE_EDITOR is unset", map[string]string{"KUBE_EDITOR": "  ", "EDITOR": "nano"}, "linux",
			Editor{Args: []string{"nano"}}},
		{"arguments split on any spaces", map[string]string{"EDITOR": "code  --wait\t--new-window"}, "linux",
			Editor{Args: []string{"code", "--wait", "--new-window"}}},
		{"quotes go through $SHELL", map[string]string{"EDITOR": `"/opt/my editor/bin/ed" -x`, "SHELL": "/bin/bash"}, "linux",
			Editor{Args: []string{"/bin/bash", "-c", `"/opt/my editor/bin/ed" -x`}, Shell: true}},
		{"no $SHELL: /bin/sh", map[string]string{"EDITOR": `ed 'a b'`}, "linux",
			Editor{Args: []string{"/bin/sh", "-c", `ed 'a b'`}, Shell: true}},
		{"backslashes on windows: cmd", map[string]string{"EDITOR": `C:\Tools\ed.exe`}, "windows",
			Editor{Args: []string{"cmd", "/C", `C:\Tools\ed.exe`}, Shell: true, Windows: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := EditorFromEnv(func(k string) string { return tc.env[k] }, tc.goos)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestEditorCommand(t *testing.T) {
	for _, tc := range []struct {
		name   string
		editor Editor
		path   string
		want   []string
	}{
		{"plain", Editor{Args: []string{"code", "--wait"}}, "/tmp/f.yaml", []string{"code", "--wait", "/tmp/f.yaml"}},
		{"shell quotes the path", Editor{Args: []string{"/bin/sh", "-c", `"ed" -x`}, Shell: true}, "/tmp/it's $HOME.yaml",
			[]string{"/bin/sh", "-c", `"ed" -x '/tmp/it'\''s $HOME.yaml'`}},
		{"cmd", Editor{Args: []string{"cmd", "/C", `C:\ed.exe`}, Shell: true, Windows: true}, `C:\Temp\f.yaml`,
			[]string{"cmd", "/C", `C:\ed.exe "C:\Temp\f.yaml"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.editor.command(tc.path)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// The shell form reaches the file even when its path holds a quote and a
// dollar sign: the editor receives exactly one argument, the path.
func TestEditorLaunchThroughShell(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a dir")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "editor.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n[ $# -eq 2 ] && [ \"$1\" = -x ] && echo edited > \"$2\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "it's $HOME.yaml")
	e := EditorFromEnv(func(k string) string {
		return map[string]string{"KUBE_EDITOR": `"` + script + `" -x`}[k]
	}, "linux")
	if !e.Shell {
		t.Fatalf("want the shell form, got %+v", e)
	}
	if err := e.Launch(context.Background(), file, nil, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(file); string(got) != "edited\n" {
		t.Fatalf("the editor did not write the file: %q", got)
	}
}

func TestEditorLaunchFails(t *testing.T) {
	err := Editor{Args: []string{"false"}}.Launch(context.Background(), "/nonexistent", nil, &bytes.Buffer{}, &bytes.Buffer{})
	if want := `the editor "false" failed: exit status 1`; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}
