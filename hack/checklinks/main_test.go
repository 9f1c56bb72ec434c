package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeTree writes files (slash-separated path -> content) under a new
// temporary root and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCheck(t *testing.T) {
	root := writeTree(t, map[string]string{
		"README.md": `# Project

See [the guide](docs/guide.md), [its flags](docs/guide.md#the---timeout-flag-explained),
and [the second one](docs/guide.md#usage-1).
A [moved guide](docs/moved.md) and [a wrong anchor](docs/guide.md#no-such-section).
Not checked: [a site](https://example.com/missing.md), [mail](mailto:a@example.com),
and ` + "`[code](missing-in-code.md)`" + `; [a section here](#project), [a missing one](#nowhere).

` + "```sh" + `
cat [not a link](missing-in-fence.md)
` + "```" + `

![a picture](docs/img/missing.png)
[ref]: docs/gone.md
`,
		"docs/guide.md": `# Guide

## The ` + "`--timeout`" + ` flag, explained

## Usage

## Usage

Back to [the README](../README.md#project), [usage](#usage-1), [the code](../hack/run.sh),
[a directory](commands/), and [outside](../../elsewhere.md).
`,
		"docs/commands/ref.md": "# Reference\n\n[up](../guide.md#usage)\n",
		"deploy/README.md":     "# Deploy\n\n[the guide](../docs/guide.md#usage) and [a file](missing.yaml)\n",
		"hack/run.sh":          "#!/bin/sh\n",
	})

	got, err := check(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []brokenLink{
		{file: "README.md", line: 5, target: "docs/moved.md", why: "no such file"},
		{file: "README.md", line: 5, target: "docs/guide.md#no-such-section", why: "no heading with this anchor in docs/guide.md"},
		{file: "README.md", line: 7, target: "#nowhere", why: "no heading with this anchor in README.md"},
		{file: "README.md", line: 13, target: "docs/img/missing.png", why: "no such file"},
		{file: "README.md", line: 14, target: "docs/gone.md", why: "no such file"},
		{file: "deploy/README.md", line: 3, target: "missing.yaml", why: "no such file"},
		{file: "docs/guide.md", line: 10, target: "../../elsewhere.md", why: "outside the repository"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(brokenLink{})); diff != "" {
		t.Errorf("check (-want +got):\n%s", diff)
	}
}

func TestCheckNeedsAReadme(t *testing.T) {
	if _, err := check(t.TempDir()); err == nil {
		t.Fatal("check of a directory without README.md succeeded")
	}
}

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Exit codes", "exit-codes"},
		{"The heartbeat and the audit", "the-heartbeat-and-the-audit"},
		{"`upgrade-run`", "upgrade-run"},
		{"Guarantees, and the commands that check them", "guarantees-and-the-commands-that-check-them"},
		{"Many writers at once (contention)", "many-writers-at-once-contention"},
		{"snake_case and CamelCase", "snake_case-and-camelcase"},
		{"A [linked](other.md) word", "a-linked-word"},
		{"Go 1.26: what's new?", "go-126-whats-new"},
	} {
		t.Run(tc.heading, func(t *testing.T) {
			if got := slug(tc.heading); got != tc.want {
				t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
			}
		})
	}
}

func TestReadAnchorsNumbersRepeats(t *testing.T) {
	root := writeTree(t, map[string]string{"a.md": "# Usage\n## Usage ##\n```\n# not a heading\n```\n### Usage\n#hashtag\n"})
	got, err := readAnchors(filepath.Join(root, "a.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"usage": true, "usage-1": true, "usage-2": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("readAnchors (-want +got):\n%s", diff)
	}
}

// A guide cited by a message, a comment or a deployment file must have
// the headings the citation names, in every form the sources use.
func TestCheckCitations(t *testing.T) {
	root := writeTree(t, map[string]string{
		"README.md": "# Project\n",
		"docs/agent.md": "# Running the agent\n\n## What it does\n\n## Running it with systemd\n\n" +
			"### Renewing the agent's credentials\n\n## Agents that run upgrades\n",
		"pkg/nodes/nodes.go": `package nodes

// See docs/agent.md ("What it does", "Running it with systemd").
const renew = "renew it, as docs/agent.md says (\"Renewing the agent's credentials\")"
const moved = "renew it, as docs/rollout.md says (\"Renewing the agent's credentials\")"
const gone = "renew it, as docs/agent.md says (\"Renewing the credentials\")"

// The deployment, as docs/agent.md ("Agents
// that run upgrades") and docs/agent.md#running-it-with-systemd say;
// not docs/agent.md#renewing, nor docs/agent.md, "What it did".
`,
		"deploy/agent.service":    "# See docs/agent.md\n# (\"Running it with systemd\", \"The rights\").\n",
		"deploy/README.md":        "# Deploy\n",
		"pkg/x/testdata/in.go":    "// docs/agent.md (\"Nowhere\")\n",
		"hack/checklinks/main.go": "// docs/agent.md (\"Nowhere\")\n",
		"cmd/tool/main.go":        "// The whole guide: docs/agent.md.\n// A guide that is gone: docs/gone.md.\n",
	})
	got, err := check(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []brokenLink{
		{file: "cmd/tool/main.go", line: 2, target: "docs/gone.md", why: "no such file"},
		{file: "deploy/agent.service", line: 1, target: `docs/agent.md ("Running it with systemd", "The rights")`, why: `no heading "The rights" in docs/agent.md`},
		{file: "pkg/nodes/nodes.go", line: 5, target: `docs/rollout.md ("Renewing the agent's credentials")`, why: "no such file"},
		{file: "pkg/nodes/nodes.go", line: 6, target: `docs/agent.md ("Renewing the credentials")`, why: `no heading "Renewing the credentials" in docs/agent.md`},
		{file: "pkg/nodes/nodes.go", line: 10, target: "docs/agent.md#renewing", why: "no heading with this anchor in docs/agent.md"},
		{file: "pkg/nodes/nodes.go", line: 10, target: `docs/agent.md ("What it did")`, why: `no heading "What it did" in docs/agent.md`},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(brokenLink{})); diff != "" {
		t.Errorf("check (-want +got):\n%s", diff)
	}
}

// The repository itself: every link of its guides, and every guide its
// sources cite, resolves (make verify runs the command too).
func TestRepositoryResolves(t *testing.T) {
	broken, err := check(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Error(b)
	}
}
