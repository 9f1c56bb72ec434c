package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// binary is one linux binary goreleaser built.
type binary struct {
	platform v1.Platform
	path     string
}

// artifact is the part of an entry of goreleaser's artifacts.json read here.
type artifact struct {
	Type   string `json:"type"`
	Path   string `json:"path"`
	Goos   string `json:"goos"`
	Goarch string `json:"goarch"`
	Extra  struct {
		ID string `json:"ID"`
	} `json:"extra"`
}

// linuxBinaries lists the plugin's linux binaries in goreleaser's
// artifacts.json, sorted by architecture: the image's platforms are the
// ones the release built.
func linuxBinaries(root, dist string) ([]binary, error) {
	data, err := os.ReadFile(filepath.Join(dist, "artifacts.json"))
	if err != nil {
		return nil, fmt.Errorf("reading goreleaser's artifacts (run goreleaser first): %w", err)
	}
	var artifacts []artifact
	if err := json.Unmarshal(data, &artifacts); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dist, "artifacts.json"), err)
	}
	var bins []binary
	for _, a := range artifacts {
		if a.Type != "Binary" || a.Goos != "linux" || a.Extra.ID != "kubectl-kubeadmcfg" {
			continue
		}
		path := a.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(root, path) // goreleaser writes paths relative to where it ran
		}
		bins = append(bins, binary{platform: v1.Platform{OS: a.Goos, Architecture: a.Goarch}, path: path})
	}
	if len(bins) == 0 {
		return nil, fmt.Errorf("%s names no linux binary of kubectl-kubeadmcfg", filepath.Join(dist, "artifacts.json"))
	}
	slices.SortFunc(bins, func(a, b binary) int { return strings.Compare(a.platform.Architecture, b.platform.Architecture) })
	return bins, nil
}

func platformNames(bins []binary) []string {
	names := make([]string, 0, len(bins))
	for _, b := range bins {
		names = append(names, b.platform.String())
	}
	return names
}

// stamp is what `kubectl-kubeadmcfg version -o json` reports that
// goreleaser stamped in with -ldflags -X.
type stamp struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Date    string `json:"date"`
}

// readStamp asks the binary of this machine's platform for its version,
// commit and date: the values goreleaser's templates gave, which ko must
// stamp in alike for the image to carry the same bytes.
func readStamp(bins []binary) (stamp, error) {
	host := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	for _, b := range bins {
		if !b.platform.Equals(host) {
			continue
		}
		var out, errOut bytes.Buffer
		cmd := exec.Command(b.path, "version", "-o", "json")
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			return stamp{}, fmt.Errorf("%s version: %w: %s", b.path, err, errOut.String())
		}
		var s stamp
		if err := json.Unmarshal(out.Bytes(), &s); err != nil {
			return stamp{}, fmt.Errorf("%s version -o json: %w", b.path, err)
		}
		if s.Version == "" {
			return stamp{}, fmt.Errorf("%s reports no version", b.path)
		}
		return s, nil
	}
	return stamp{}, fmt.Errorf("goreleaser built no binary for this machine (%s) to read the version from: build the image on one of %s", host, strings.Join(platformNames(bins), ", "))
}

// sameBinaries checks that the binary in each platform's image is the one
// goreleaser built for it: the image ships what the archives ship.
func sameBinaries(idx v1.ImageIndex, bins []binary) error {
	manifest, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if len(manifest.Manifests) != len(bins) {
		return fmt.Errorf("ko built %d images for %d platforms", len(manifest.Manifests), len(bins))
	}
	for _, desc := range manifest.Manifests {
		i := slices.IndexFunc(bins, func(b binary) bool { return desc.Platform != nil && desc.Platform.Equals(b.platform) })
		if i < 0 {
			return fmt.Errorf("ko built an image for %v, which goreleaser did not build", desc.Platform)
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return err
		}
		inImage, err := fileDigest(img, strings.TrimPrefix(binaryPath, "/"))
		if err != nil {
			return fmt.Errorf("%s image: %w", bins[i].platform, err)
		}
		f, err := os.Open(bins[i].path)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		_ = f.Close()
		if err != nil {
			return err
		}
		if released := fmt.Sprintf("%x", h.Sum(nil)); inImage != released {
			return fmt.Errorf("the %s image holds a binary (sha256 %s) other than goreleaser's %s (sha256 %s): ko must build with .goreleaser.yaml's flags, ldflags and env", bins[i].platform, inImage, bins[i].path, released)
		}
	}
	return nil
}

// fileDigest is the sha256 of the file at name in the image's layers.
func fileDigest(img v1.Image, name string) (string, error) {
	layers, err := img.Layers()
	if err != nil {
		return "", err
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return "", err
		}
		digest, err := findInTar(rc, name)
		_ = rc.Close()
		if err != nil || digest != "" {
			return digest, err
		}
	}
	return "", fmt.Errorf("no layer holds %s", name)
}

func findInTar(r io.Reader, name string) (string, error) {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		// ko names its entries from the root ("/ko-app/..."); others do not.
		if strings.TrimPrefix(path.Clean("/"+hdr.Name), "/") != name {
			continue
		}
		h := sha256.New()
		if _, err := io.Copy(h, tr); err != nil {
			return "", err
		}
		return fmt.Sprintf("%x", h.Sum(nil)), nil
	}
}
