// Command krew-render renders the krew-release-bot template .krew.yaml for a
// tag, offline, the way the bot does on release: {{ .TagName }} is the tag,
// and {{ addURIAndSha URL .TagName }} becomes the archive's uri and sha256.
// The sha256 comes from the checksums file of a local `make dist` when given,
// otherwise a stand-in hash, so the structure can be validated without a
// release.
//
//	go run ./hack/krew-render -tag v0.1.0 [-checksums dist/checksums.txt] .krew.yaml > kubeadmcfg.yaml
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path"
	"strings"
	"text/template"
)

func main() {
	tag := flag.String("tag", "v0.0.0", "the release tag to render")
	checksums := flag.String("checksums", "", "a goreleaser checksums file to take the sha256 of each archive from")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: krew-render -tag TAG [-checksums FILE] TEMPLATE")
		os.Exit(2)
	}
	if err := render(flag.Arg(0), *tag, *checksums); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func render(file, tag, checksumsFile string) error {
	sums := map[string]string{}
	if checksumsFile != "" {
		f, err := os.Open(checksumsFile)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if sum, name, ok := strings.Cut(sc.Text(), "  "); ok {
				sums[name] = sum
			}
		}
	}
	data := struct{ TagName string }{tag}
	funcs := template.FuncMap{
		"addURIAndSha": func(url, tag string) (string, error) {
			var b bytes.Buffer
			t, err := template.New("url").Parse(url)
			if err != nil {
				return "", err
			}
			if err := t.Execute(&b, struct{ TagName string }{tag}); err != nil {
				return "", err
			}
			sum, ok := sums[path.Base(b.String())]
			if !ok {
				if checksumsFile != "" {
					return "", fmt.Errorf("no checksum for %s in %s", path.Base(b.String()), checksumsFile)
				}
				// A stand-in of the right shape: the hash of the URL.
				h := sha256.Sum256(b.Bytes())
				sum = hex.EncodeToString(h[:])
			}
			return fmt.Sprintf("uri: %s\n    sha256: %s", b.String(), sum), nil
		},
	}
	text, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	t, err := template.New(path.Base(file)).Funcs(funcs).Parse(string(text))
	if err != nil {
		return err
	}
	return t.Execute(os.Stdout, data)
}
