package cmdutil

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Editor is the command that opens a file for the user, chosen the way
// kubectl edit chooses it. k8s.io/kubectl's editor package is not a
// dependency of the plugin; this is the small part of it that edit needs.
type Editor struct {
	// Args is the command and its arguments; the file's path goes last.
	Args []string
	// Shell is true when Args is a shell, its flag and the editor's command
	// line, which held quotes or backslashes only a shell can split.
	Shell bool
	// Windows quotes the path for cmd.exe rather than a POSIX shell.
	Windows bool
}

// EditorFromEnv picks the editor as kubectl edit does, so that users' habits
// carry over: $KUBE_EDITOR, else
// $EDITOR, else vi (notepad on Windows). A command line with arguments
// ("code --wait") is split on spaces; one with quotes or backslashes is run
// through $SHELL (/bin/sh when unset; cmd on Windows).
func EditorFromEnv(getenv func(string) string, goos string) Editor {
	line := ""
	for _, name := range []string{"KUBE_EDITOR", "EDITOR"} {
		if line = strings.TrimSpace(getenv(name)); line != "" {
			break
		}
	}
	windows := goos == "windows"
	if line == "" {
		line = "vi"
		if windows {
			line = "notepad"
		}
	}
	if !strings.ContainsAny(line, `"'\`) {
		return Editor{Args: strings.Fields(line), Windows: windows}
	}
	shell, flag := getenv("SHELL"), "-c"
	if shell == "" {
		shell = "/bin/sh"
		if windows {
			shell, flag = "cmd", "/C"
		}
	}
	return Editor{Args: []string{shell, flag, line}, Shell: true, Windows: windows}
}

// command returns the command line that opens path.
func (e Editor) command(path string) []string {
	args := slices.Clone(e.Args)
	if !e.Shell {
		return append(args, path)
	}
	quoted := `'` + strings.ReplaceAll(path, `'`, `'\''`) + `'`
	if e.Windows {
		quoted = `"` + path + `"`
	}
	args[len(args)-1] += " " + quoted
	return args
}

// Launch opens path in the editor and waits for it to exit. A failed or
// interrupted editor is an error.
//
// The editor is given in, out and errOut themselves: on a terminal it
// draws on the terminal, and, as every child, runs in a process group of
// its own, which holds the terminal's foreground while it runs, so that
// the keys it reads (Ctrl-C included) are its own.
func (e Editor) Launch(ctx context.Context, path string, in io.Reader, out, errOut io.Writer) error {
	tty, err := editorTerminal(in)
	if err != nil {
		return err
	}
	cmd := &proc.Cmd{Args: e.command(path), Stdin: in, Stdout: out, Stderr: errOut, NoTail: true, Foreground: tty}
	if err := cmd.Run(ctx); err != nil {
		if ctx.Err() != nil {
			return exitcode.Failuref("interrupted while the editor was open")
		}
		var run *proc.RunError
		if errors.As(err, &run) && run.Err != nil {
			err = run.Err // in the system's words ("exit status 1"): the editor's name is said already
		}
		return exitcode.Failuref("the editor %q failed: %w", strings.Join(e.Args, " "), err)
	}
	return nil
}

// editorTerminal is the terminal to hand the editor, when in is this
// program's terminal. Started in the background (&), this program first
// stops, as any job reading its terminal in the background does, until it
// is brought to the foreground (fg).
func editorTerminal(in io.Reader) (*os.File, error) {
	tty, background := proc.ForegroundTerminal(in)
	if background {
		stopInTheBackground()
		tty, background = proc.ForegroundTerminal(in)
	}
	if background { // continued in the background (bg), or nothing could stop it
		return nil, exitcode.Failuref("the editor needs the terminal, whose foreground another process group holds: run edit in the foreground")
	}
	return tty, nil
}

// IsTerminal reports whether v is a file open on a terminal: a verb that
// asks a user for something does so only when one is there.
func IsTerminal(v any) bool {
	f, ok := v.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}
