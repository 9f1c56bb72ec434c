package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// scriptedEditor is an editor a test scripts round by round: the nth time
// the plugin opens it, it keeps a copy of the file it was given as
// given-N.yaml and runs rounds[n-1], a piece of sh with the file in $f (and
// `set -e`, so a failing check fails the editor). Inside a round, `patch
// ARGS` runs `kubectl kubeadmcfg patch ARGS` on the test's kubeadm-config:
// a change made on the server while the editor is open.
type scriptedEditor struct {
	t      *testing.T
	dir    string
	script string
}

func (e *env) scriptedEditor(rounds ...string) *scriptedEditor {
	e.t.Helper()
	dir := e.t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\nset -e\nfor f; do :; done\ndir=%s\n", shellQuote(dir))
	fmt.Fprintf(&b, "patch() { kubectl kubeadmcfg patch \"$@\" --kubeconfig %s --context %s -n %s >>\"$dir/patch.out\" 2>&1; }\n",
		shellQuote(s.cluster.Kubeconfig), testcluster.AdminContext, e.ns)
	b.WriteString(`n=$(( $(cat "$dir/rounds" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$dir/rounds"
echo "$f" > "$dir/file"
cp "$f" "$dir/given-$n.yaml"
case $n in
`)
	for i, r := range rounds {
		fmt.Fprintf(&b, "%d)\n%s\n;;\n", i+1, r)
	}
	b.WriteString("*) echo \"the editor was opened $n times\" >&2; exit 1 ;;\nesac\n")
	script := filepath.Join(dir, "edit.sh")
	if err := os.WriteFile(script, []byte(b.String()), 0o700); err != nil {
		e.t.Fatal(err)
	}
	// An editor given with an argument, as "code --wait" is.
	e.t.Setenv("KUBE_EDITOR", script+" --wait")
	e.t.Setenv("EDITOR", "")
	return &scriptedEditor{t: e.t, dir: dir, script: script}
}

// quoted moves the script into a directory whose name holds a space and
// names it in KUBE_EDITOR with quotes, which only a shell can split.
func (ed *scriptedEditor) quoted() {
	ed.t.Helper()
	dir := filepath.Join(ed.dir, "an editor")
	if err := os.Mkdir(dir, 0o700); err != nil {
		ed.t.Fatal(err)
	}
	moved := filepath.Join(dir, "edit.sh")
	if err := os.Rename(ed.script, moved); err != nil {
		ed.t.Fatal(err)
	}
	ed.t.Setenv("KUBE_EDITOR", `"`+moved+`" --wait`)
}

// rounds is how many times the editor was opened.
func (ed *scriptedEditor) rounds() int {
	data, err := os.ReadFile(filepath.Join(ed.dir, "rounds"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return n
}

// given is the text the editor was given in round n.
func (ed *scriptedEditor) given(n int) string {
	ed.t.Helper()
	data, err := os.ReadFile(filepath.Join(ed.dir, fmt.Sprintf("given-%d.yaml", n)))
	if err != nil {
		ed.t.Fatal(err)
	}
	return string(data)
}

// file is the path of the file the plugin had the editor open.
func (ed *scriptedEditor) file() string {
	ed.t.Helper()
	data, err := os.ReadFile(filepath.Join(ed.dir, "file"))
	if err != nil {
		ed.t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func shellQuote(s string) string { return `'` + strings.ReplaceAll(s, `'`, `'\''`) + `'` }

// replace is a round's step that replaces the line from with to, and fails
// the editor when the file has no such line.
func replace(from, to string) string {
	return fmt.Sprintf("grep -qxF %s \"$f\"\nsed -i %s \"$f\"", shellQuote(from), shellQuote("s|^"+from+"$|"+to+"|"))
}

// expect is a round's step that fails the editor unless the file holds text.
func expect(text string) string { return fmt.Sprintf("grep -qF -- %s \"$f\"", shellQuote(text)) }

func wantIn(t *testing.T, what, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

func wantGone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is left behind (%v)", path, err)
	}
}

// editResult is the part of `edit -o json` the tests read.
type editResult struct {
	Changed, Cancelled                     bool
	OldResourceVersion, NewResourceVersion string
	Attempts                               int
	Diff, Backup, KeptFile                 string
}

func TestEditWritesAValidEdit(t *testing.T) {
	e := newEnv(t)
	ed := e.scriptedEditor(`echo "output of the editor"` + "\n" + replace("clusterName: kubernetes", "clusterName: edited-cluster"))
	rv := e.configMapRV()
	backups := t.TempDir()
	r := e.plugin("edit", "-o", "json", "--diff", "--backup-dir", backups)
	wantExit(t, r, 0)
	var out editResult
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("-o json is not JSON (the editor's output must stay off stdout): %v\n%s", err, r)
	}
	if !out.Changed || out.Cancelled || out.OldResourceVersion != rv || out.NewResourceVersion != e.configMapRV() || out.Attempts != 1 {
		t.Errorf("result: %+v (resourceVersion was %s)", out, rv)
	}
	wantIn(t, "the diff", out.Diff, "-clusterName: kubernetes\n+clusterName: edited-cluster\n")
	wantIn(t, "stderr", r.stderr, "output of the editor")
	wantIn(t, "the document", e.document(), "\nclusterName: edited-cluster\n")
	// The editor was given the document as stored, under a header naming
	// the server, the ConfigMap and the resourceVersion.
	given := ed.given(1)
	wantIn(t, "the file given to the editor", given,
		"# server: "+s.cluster.URL+"\n",
		"# configmap: "+e.ns+"/kubeadm-config, key ClusterConfiguration\n",
		"# resourceVersion: "+rv+"\n",
		"#\n"+s.seedDoc)
	if !strings.HasSuffix(given, "#\n"+s.seedDoc) {
		t.Errorf("the document is not given as stored:\n%s", given)
	}
	wantGone(t, ed.file())
	// The automatic backup holds the replaced document.
	backup, err := os.ReadFile(out.Backup)
	if err != nil || !strings.HasPrefix(out.Backup, backups) {
		t.Fatalf("backup %q: %v\n%s", out.Backup, err, r)
	}
	wantIn(t, "the backup", string(backup), "# reason: before edit\n", "# resourceVersion: "+rv+"\n", "\nclusterName: kubernetes\n")
	e.wantKubeadmAccepts()
}

func TestEditCancelled(t *testing.T) {
	for _, tc := range []struct {
		name, round, want string
	}{
		{"saved unchanged", ":", "edit cancelled, no changes made"},
		{"emptied", `: > "$f"`, "edit cancelled, the file was empty"},
		{"only comments left", `sed -i 's/^/# /' "$f"`, "edit cancelled, the file was empty"},
		{"a comment added", `echo "# a note" >> "$f"`, "edit cancelled, no changes made"},
		{"the same data in another layout", replace("clusterName: kubernetes", `clusterName: "kubernetes"`), "edit cancelled, no changes made"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ed := e.scriptedEditor(tc.round)
			// $EDITOR is used when $KUBE_EDITOR is not set.
			t.Setenv("EDITOR", os.Getenv("KUBE_EDITOR"))
			t.Setenv("KUBE_EDITOR", "")
			rv := e.configMapRV()
			r := e.plugin("edit")
			wantExit(t, r, 0)
			if r.stdout != tc.want+"\n" {
				t.Errorf("want %q, got %s", tc.want, r)
			}
			if got := e.configMapRV(); got != rv || ed.rounds() != 1 {
				t.Errorf("resourceVersion %s -> %s after %d rounds: a cancelled edit wrote", rv, got, ed.rounds())
			}
			wantGone(t, ed.file())
		})
	}
	t.Run("saved unchanged, a key given twice in the stored document", func(t *testing.T) {
		e := newEnvWith(t, map[string]string{"ClusterConfiguration": s.seedDoc + "apiServer:\n  certSANs:\n  - b.example.com\n"})
		ed := e.scriptedEditor(":")
		rv := e.configMapRV()
		r := e.plugin("edit")
		wantExit(t, r, 0)
		if r.stdout != "edit cancelled, no changes made\n" || e.configMapRV() != rv {
			t.Errorf("want cancelled and nothing written, got %s", r)
		}
		wantGone(t, ed.file())
	})
	t.Run("-o json", func(t *testing.T) {
		e := newEnv(t)
		e.scriptedEditor(":")
		r := e.plugin("edit", "-o", "json")
		wantExit(t, r, 0)
		var out editResult
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || !out.Cancelled || out.Changed {
			t.Fatalf("%+v (%v): %s", out, err, r)
		}
	})
}

// Without a terminal the editor opens once: an invalid text exits 3, a
// conflict 4, a failed editor 1, and nothing is written. The user's text is
// kept.
func TestEditNonInteractiveFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		round string
		code  int
		want  []string
		kept  string // in the kept file
	}{
		{"invalid", replace("  podSubnet: 10.244.0.0/16", "  podSubnet: 10.244.0.0/33"), 3,
			[]string{`error: the edited ClusterConfiguration is invalid, nothing was written: networking.podSubnet: Invalid value: "10.244.0.0/33"`},
			"podSubnet: 10.244.0.0/33"},
		{"unknown field", `echo "unknownField: 1" >> "$f"`, 3,
			[]string{"error: the edited ClusterConfiguration is invalid, nothing was written: ", `unknown field "unknownField"`}, "unknownField: 1"},
		{"not YAML", `printf 'apiServer: [\n' >> "$f"`, 3,
			[]string{"error: the edited ClusterConfiguration is invalid, nothing was written: the ClusterConfiguration is not a YAML mapping"}, "apiServer: ["},
		// A second apiServer block, instead of an edit of the first: read
		// leniently it would replace the first, and its extraArgs be deleted.
		{"a key given twice", secondAPIServerBlock, 3,
			[]string{"error: the edited ClusterConfiguration is invalid, nothing was written: the ClusterConfiguration gives a key twice, which kubeadm refuses (line ",
				`: key "apiServer" already set in map); keep one`}, "  - b.example.com\n"},
		{"larger than 2 MiB", `head -c 3000000 /dev/zero | tr '\0' '#' >> "$f"`, 3,
			[]string{"error: the edited file is larger than 2 MiB, the limit for any input (twice what a ConfigMap holds); nothing was written"}, "########"},
		{"apiVersion changed", replace("apiVersion: kubeadm.k8s.io/v1beta4", "apiVersion: kubeadm.k8s.io/v1"), 3,
			[]string{"error: the edited ClusterConfiguration is invalid, nothing was written: changing apiVersion is refused"}, "apiVersion: kubeadm.k8s.io/v1\n"},
		{"the editor fails", replace("clusterName: kubernetes", "clusterName: lost") + "\nexit 7", 1,
			[]string{`error: the editor "`, `edit.sh --wait" failed: exit status 7; nothing was written`}, "clusterName: lost"},
		{"the same field changed meanwhile", "patch --set clusterName=from-patch\n" + replace("clusterName: kubernetes", "clusterName: from-editor"), 4,
			[]string{"error: kubeadm-config changed on the server while the editor was open (resourceVersion ",
				`), and the same fields were changed in the edit and on the live document: clusterName: was "kubernetes", edited "from-editor", live "from-patch"; nothing was written`},
			"clusterName: from-editor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ed := e.scriptedEditor(tc.round)
			before := e.document()
			r := e.plugin("edit")
			wantExit(t, r, tc.code)
			wantIn(t, "stderr", r.stderr, tc.want...)
			wantIn(t, "stderr", r.stderr, "; your text is kept in "+ed.file()+"\n")
			if ed.rounds() != 1 {
				t.Errorf("the editor was opened %d times without a terminal", ed.rounds())
			}
			kept, err := os.ReadFile(ed.file())
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(ed.file())
			wantIn(t, "the kept file", string(kept), tc.kept)
			after := e.document()
			if tc.code == 4 {
				// The other change is kept, and nothing of the edit.
				before = strings.Replace(before, "\nclusterName: kubernetes\n", "\nclusterName: from-patch\n", 1)
			}
			if after != before {
				t.Errorf("the document changed:\n%s\nwant:\n%s", after, before)
			}
		})
	}
}

// secondAPIServerBlock is a round's step that adds a SAN in a second
// apiServer block at the bottom, instead of in the first.
const secondAPIServerBlock = `printf 'apiServer:\n  certSANs:\n  - b.example.com\n' >> "$f"`

// A change made on the server while the editor is open, to other fields,
// is merged with the edit: both are kept. A write of the user's whole text
// would drop the concurrent argument and subnet.
func TestEditMergesAConcurrentChange(t *testing.T) {
	e := newEnv(t)
	ed := e.scriptedEditor("patch --set apiServer.extraArgs.concurrent=from-patch --set networking.serviceSubnet=10.97.0.0/16\n" +
		replace("clusterName: kubernetes", "clusterName: from-editor") + "\n" +
		replace("  podSubnet: 10.244.0.0/16", "  podSubnet: 10.245.0.0/16"))
	ed.quoted()
	rv := e.configMapRV()
	r := e.plugin("edit", "-o", "json")
	wantExit(t, r, 0)
	var out editResult
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.OldResourceVersion == rv || !out.Changed {
		t.Errorf("the edit did not replace the concurrently patched version: %+v (started from %s)", out, rv)
	}
	wantIn(t, "the document", e.document(),
		"\nclusterName: from-editor\n", "  podSubnet: 10.245.0.0/16\n", // the edit
		"  - name: concurrent\n    value: from-patch\n", "  serviceSubnet: 10.97.0.0/16\n") // the concurrent patch
	e.wantKubeadmAccepts()
}

// At a terminal the editor reopens: on the user's own text with the
// problems at the top, or after a conflict on the live version with the
// user's other changes applied.
func TestEditInteractive(t *testing.T) {
	t.Run("invalid, fixed on the second round", func(t *testing.T) {
		e := newEnv(t)
		ed := e.scriptedEditor(
			replace("  podSubnet: 10.244.0.0/16", "  podSubnet: 10.244.0.0/33")+"\n"+replace("clusterName: kubernetes", "clusterName: kept-across-rounds"),
			expect(`# - networking.podSubnet: Invalid value: "10.244.0.0/33"`)+"\n"+replace("  podSubnet: 10.244.0.0/33", "  podSubnet: 10.245.0.0/16"))
		r := e.pluginOnTerminal("edit")
		wantExit(t, r, 0)
		wantIn(t, "the terminal", r.stdout, "kubeadm-config edited (resourceVersion ")
		if ed.rounds() != 2 {
			t.Errorf("the editor was opened %d times, want 2", ed.rounds())
		}
		given := ed.given(2)
		if n := strings.Count(given, "# server: "); n != 1 {
			t.Errorf("the header is there %d times:\n%s", n, given)
		}
		wantIn(t, "the reopened file", given,
			"# The edited ClusterConfiguration is invalid; nothing was written.",
			"\nclusterName: kept-across-rounds\n", "  podSubnet: 10.244.0.0/33\n") // the user's text, not the original
		wantIn(t, "the document", e.document(), "\nclusterName: kept-across-rounds\n", "  podSubnet: 10.245.0.0/16\n")
		wantGone(t, ed.file())
	})
	t.Run("a key given twice, merged into one on the second round", func(t *testing.T) {
		e := newEnv(t)
		ed := e.scriptedEditor(secondAPIServerBlock,
			expect(`# - the ClusterConfiguration gives a key twice, which kubeadm refuses (line `)+"\n"+
				`head -n -3 "$f" > "$f.new" && cat "$f.new" > "$f" && rm "$f.new"`+"\n"+
				replace("  - 192.0.2.10", `  - 192.0.2.10\n  - b.example.com`))
		r := e.pluginOnTerminal("edit")
		wantExit(t, r, 0)
		if ed.rounds() != 2 {
			t.Fatalf("the editor was opened %d times, want 2: %s", ed.rounds(), r)
		}
		wantIn(t, "the reopened file", ed.given(2), "\n  - b.example.com\n") // the user's text, both blocks
		// Both the new SAN and the first block's extraArgs are kept.
		wantIn(t, "the document", e.document(), "  - 192.0.2.10\n  - b.example.com\n", "  - name: audit-log-maxage\n")
	})
	t.Run("invalid, then saved unchanged", func(t *testing.T) {
		e := newEnv(t)
		ed := e.scriptedEditor(replace("  podSubnet: 10.244.0.0/16", "  podSubnet: 10.244.0.0/33"), ":")
		rv := e.configMapRV()
		r := e.pluginOnTerminal("edit")
		wantExit(t, r, 0)
		wantIn(t, "the terminal", r.stdout, "edit cancelled, no valid changes were saved; your text is kept in "+ed.file())
		if got := e.configMapRV(); got != rv || ed.rounds() != 2 {
			t.Errorf("resourceVersion %s -> %s after %d rounds", rv, got, ed.rounds())
		}
		os.Remove(ed.file())
	})
	for _, tc := range []struct {
		name, round2, clusterName string
	}{
		// Saved as reopened, the other change stays.
		{"a conflict, resolved by keeping the live value", expect("\nclusterName: from-patch\n"), "from-patch"},
		// Only a deliberate second edit overwrites it.
		{"a conflict, resolved by setting the edited value again", replace("clusterName: from-patch", "clusterName: from-editor"), "from-editor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ed := e.scriptedEditor(
				"patch --set clusterName=from-patch\n"+
					replace("clusterName: kubernetes", "clusterName: from-editor")+"\n"+
					replace("  podSubnet: 10.244.0.0/16", "  podSubnet: 10.245.0.0/16"),
				tc.round2)
			r := e.pluginOnTerminal("edit")
			wantExit(t, r, 0)
			if ed.rounds() != 2 {
				t.Fatalf("the editor was opened %d times, want 2: %s", ed.rounds(), r)
			}
			// The reopened file is the live version (the resourceVersion the
			// write then replaced), with the edit's other change applied.
			m := regexp.MustCompile(`kubeadm-config edited \(resourceVersion (\d+) -> `).FindStringSubmatch(r.stdout)
			if m == nil {
				t.Fatalf("no summary line: %s", r)
			}
			replaced := m[1]
			wantIn(t, "the reopened file", ed.given(2),
				"# kubeadm-config changed on the server while the editor was open",
				`# - clusterName: was "kubernetes", edited "from-editor", live "from-patch"`,
				"# resourceVersion: "+replaced+"\n",
				"\nclusterName: from-patch\n", "  podSubnet: 10.245.0.0/16\n")
			wantIn(t, "the document", e.document(), "\nclusterName: "+tc.clusterName+"\n", "  podSubnet: 10.245.0.0/16\n")
		})
	}
}
