// Command difffuzz is the plugin's differential fuzzer: it mutates the
// corpus documents (types, CIDR boundaries, versions, ports, names, extra and
// empty documents, unknown fields) and compares the verdict of the plugin's
// validation with the real `kubeadm config validate` — kubeadm 1.37 for
// v1beta4 and v1, kubeadm 1.36 for v1beta3 — printing agreement per
// apiVersion. Each disagreement is written to -out for a look: it becomes a
// corpus case once the plugin is fixed, or a documented deliberate difference
// (README, "Where validate differs from kubeadm").
//
//	go run ./hack/difffuzz -n 400 -seed 1
//
// It is not part of `make test`; `make difffuzz` runs it. kubeadm runs in a
// network namespace of its own (unshare -n), so it never reaches the network.
package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
)

func main() {
	n := flag.Int("n", 300, "mutated files to try")
	seed := flag.Uint64("seed", 1, "random seed (the same seed tries the same files)")
	out := flag.String("out", "_output/difffuzz", "directory for the disagreements")
	corpusOnly := flag.Bool("corpus", false, "compare the corpus files as they are, without mutating")
	flag.Parse()
	if err := run(*n, *seed, *out, *corpusOnly); err != nil {
		fmt.Fprintln(os.Stderr, "difffuzz:", err)
		os.Exit(1)
	}
}

type tally struct{ cases, agree, valid, deliberate int }

// deliberate are the warnings the plugin gives where it knowingly differs from
// kubeadm (README, "Where the plugin knowingly differs"): kubeadm looks at the
// host it runs on, the plugin does not.
var deliberate = []string{"exists on the node it runs on", "kubeadm takes the host name"}

func isDeliberate(r *clusterconfig.FileReport, kubeadmOK bool) bool {
	if kubeadmOK || !r.Valid() {
		return false
	}
	return slices.ContainsFunc(r.Warnings, func(w string) bool {
		return slices.ContainsFunc(deliberate, func(d string) bool { return strings.Contains(w, d) })
	})
}

func run(n int, seed uint64, outDir string, corpusOnly bool) error {
	root, err := testcluster.RepoRoot()
	if err != nil {
		return err
	}
	bins, err := testcluster.FindBinaries()
	if err != nil {
		return err
	}
	names, seeds, err := loadSeeds(root)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, outDir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "difffuzz-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	tallies := map[string]*tally{}
	var disagreements []string
	var cases [][]byte
	if corpusOnly {
		cases = seeds
	} else {
		// Mutate the valid files mostly: one change to a valid file is where
		// the plugin can wrongly say "valid".
		var valid [][]byte
		for i, name := range names {
			if strings.HasPrefix(filepath.Base(name), "valid-") || strings.Contains(name, "documents") {
				valid = append(valid, seeds[i])
			}
		}
		for range n {
			from := seeds
			if rng.IntN(4) > 0 {
				from = valid
			}
			cases = append(cases, mutate(rng, from[rng.IntN(len(from))]))
		}
	}
	for i, data := range cases {
		api := apiVersionOf(data)
		kubeadm := bins.Kubeadm
		if api == clusterconfig.V1beta3 {
			kubeadm = bins.KubeadmV1beta3
		}
		kubeadmOK, kubeadmOut, err := kubeadmValidate(kubeadm, tmp, data)
		if err != nil {
			return err
		}
		r := clusterconfig.ValidateFile(data, clusterconfig.ValidateOptions{})
		t := tallies[api]
		if t == nil {
			t = &tally{}
			tallies[api] = t
		}
		t.cases++
		if kubeadmOK {
			t.valid++
		}
		if r.Valid() == kubeadmOK {
			t.agree++
			continue
		}
		if isDeliberate(r, kubeadmOK) {
			t.deliberate++
			continue
		}
		name := fmt.Sprintf("case-%04d-kubeadm-%s.yaml", i, map[bool]string{true: "valid", false: "invalid"}[kubeadmOK])
		note := fmt.Sprintf("# kubeadm (%s): %s\n# plugin: valid=%v %s\n", filepath.Base(filepath.Dir(kubeadm)), firstLine(kubeadmOut), r.Valid(), strings.Join(r.Errors, "; "))
		if err := os.WriteFile(filepath.Join(root, outDir, name), append([]byte(note), data...), 0o644); err != nil {
			return err
		}
		disagreements = append(disagreements, fmt.Sprintf("%s\n  kubeadm: valid=%v %s\n  plugin:  valid=%v %s",
			name, kubeadmOK, firstLine(kubeadmOut), r.Valid(), strings.Join(r.Errors, "; ")))
	}
	apis := make([]string, 0, len(tallies))
	for api := range tallies {
		apis = append(apis, api)
	}
	sort.Strings(apis)
	fmt.Printf("%-24s %6s %14s %6s %11s %9s\n", "APIVERSION", "CASES", "KUBEADM-VALID", "AGREE", "DELIBERATE", "AGREEMENT")
	total := tally{}
	for _, api := range apis {
		t := tallies[api]
		total.cases, total.agree, total.valid, total.deliberate = total.cases+t.cases, total.agree+t.agree, total.valid+t.valid, total.deliberate+t.deliberate
		t.print(api)
	}
	total.print("all")
	for _, d := range disagreements {
		fmt.Println(d)
	}
	if len(disagreements) > 0 {
		fmt.Printf("%d disagreements written to %s: make each a corpus case once fixed, or a documented deliberate difference\n", len(disagreements), outDir)
	}
	return nil
}

// print writes one row: AGREEMENT counts the deliberate differences as
// agreeing, since the README lists them.
func (t *tally) print(name string) {
	fmt.Printf("%-24s %6d %14d %6d %11d %8.1f%%\n", name, t.cases, t.valid, t.agree, t.deliberate,
		100*float64(t.agree+t.deliberate)/float64(max(t.cases, 1)))
}

// loadSeeds reads the corpus and the example documents.
func loadSeeds(root string) ([]string, [][]byte, error) {
	var names []string
	var seeds [][]byte
	for _, pattern := range []string{"testdata/corpus/*.yaml", "testdata/documents/*.yaml"} {
		files, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			return nil, nil, err
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, nil, err
			}
			names, seeds = append(names, f), append(seeds, data)
		}
	}
	if len(seeds) == 0 {
		return nil, nil, errors.New("no corpus found")
	}
	return names, seeds, nil
}

// apiVersionOf names the kubeadm apiVersion a file is checked against: its
// oldest kubeadm apiVersion, or "other".
func apiVersionOf(data []byte) string {
	for _, v := range []string{clusterconfig.V1beta3, clusterconfig.V1beta4, clusterconfig.V1} {
		if slices.ContainsFunc(strings.Split(string(data), "\n"), func(l string) bool {
			return strings.TrimSpace(l) == "apiVersion: "+v
		}) {
			return v
		}
	}
	return "other"
}

// kubeadmValidate runs the real kubeadm on data, without network.
func kubeadmValidate(bin, dir string, data []byte) (bool, string, error) {
	f := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(f, data, 0o600); err != nil {
		return false, "", err
	}
	out, err := exec.Command("unshare", "-n", bin, "config", "validate", "--allow-experimental-api", "--config", f).CombinedOutput()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return false, "", fmt.Errorf("run kubeadm: %w: %s", err, out)
	}
	return err == nil, string(out), nil
}

func firstLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "error: ") || l == "ok" {
			return l
		}
	}
	return strings.TrimSpace(out)
}
