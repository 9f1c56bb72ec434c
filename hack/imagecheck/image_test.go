package imagecheck

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/version"
)

// The OCI media types and annotations the image must use.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
	refName       = "org.opencontainers.image.ref.name"
	containerdRef = "io.containerd.image.name"
	binaryPath    = "/ko-app/kubectl-kubeadmcfg"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
}

type index struct {
	MediaType   string            `json:"mediaType"`
	Manifests   []descriptor      `json:"manifests"`
	Annotations map[string]string `json:"annotations"`
}

type manifest struct {
	MediaType string       `json:"mediaType"`
	Config    descriptor   `json:"config"`
	Layers    []descriptor `json:"layers"`
}

type imageConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		User       string            `json:"User"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// TestImage checks the image tarball KUBEADMCFG_IMAGE names: an OCI image
// layout whose every blob has its digest; one index, named as the
// DaemonSet names the image, with an image for linux/amd64 and linux/arm64;
// each with the DaemonSet's command as its entrypoint, a non-root default
// user, the OCI labels, and one layer holding the binary and nothing else;
// and that binary, run, is the plugin of the labelled version (and the
// release's own, when goreleaser's artifacts.json is beside the tarball).
func TestImage(t *testing.T) {
	file := os.Getenv("KUBEADMCFG_IMAGE")
	if file == "" {
		t.Skip("KUBEADMCFG_IMAGE names no image tarball (make dist checks the one it writes)")
	}
	files := readArchive(t, file)
	repo, command := daemonSetImage(t, "../../deploy/agent-daemonset.yaml")

	if got, want := string(files["oci-layout"]), `{"imageLayoutVersion":"1.0.0"}`; !jsonEqual(got, want) {
		t.Errorf("oci-layout = %s, want %s", got, want)
	}
	var top index
	decode(t, files["index.json"], &top)
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != mediaIndex {
		t.Fatalf("index.json must name one image index, names %+v", top.Manifests)
	}
	tag := top.Manifests[0].Annotations[refName]
	if got, want := top.Manifests[0].Annotations[containerdRef], repo+":"+tag; tag == "" || got != want {
		t.Errorf("index.json names the image %q (tag %q), want %q: the DaemonSet's repository", got, tag, want)
	}

	var idx index
	decode(t, blob(t, files, top.Manifests[0]), &idx)
	var platforms []string
	for _, d := range idx.Manifests {
		if d.Platform != nil {
			platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		}
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); diff != "" || idx.MediaType != mediaIndex {
		t.Fatalf("the index (%s) holds the wrong platforms (-want +got):\n%s", idx.MediaType, diff)
	}
	versionLabel := strings.ReplaceAll(strings.TrimPrefix(tag, "v"), "_", "+")
	wantLabels := map[string]string{
		"org.opencontainers.image.source":   "https://github.com/kubeadmcfg/kubectl-kubeadmcfg",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.version":  versionLabel,
	}
	checkLabels(t, "the index's annotations", idx.Annotations, wantLabels)

	for _, d := range idx.Manifests {
		p := d.Platform.OS + "/" + d.Platform.Architecture
		t.Run(p, func(t *testing.T) {
			var m manifest
			decode(t, blob(t, files, d), &m)
			if m.MediaType != mediaManifest || d.MediaType != mediaManifest {
				t.Errorf("manifest media type %q (index says %q), want %q", m.MediaType, d.MediaType, mediaManifest)
			}
			var cfg imageConfig
			decode(t, blob(t, files, m.Config), &cfg)
			if m.Config.MediaType != mediaConfig || cfg.OS+"/"+cfg.Architecture != p {
				t.Errorf("config %s is for %s/%s, want %s", m.Config.MediaType, cfg.OS, cfg.Architecture, p)
			}
			if diff := cmp.Diff([]string{command}, cfg.Config.Entrypoint); diff != "" || len(cfg.Config.Cmd) != 0 {
				t.Errorf("entrypoint is not the DaemonSet's command (-want +got):\n%s(cmd %q)", diff, cfg.Config.Cmd)
			}
			if u := cfg.Config.User; u == "" || u == "0" || strings.HasPrefix(u, "0:") || strings.HasPrefix(u, "root") {
				t.Errorf("the image runs as root (user %q) unless a Pod says otherwise", u)
			}
			checkLabels(t, "the config's labels", cfg.Config.Labels, wantLabels)
			if rev := cfg.Config.Labels["org.opencontainers.image.revision"]; !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(rev) {
				t.Errorf("label org.opencontainers.image.revision = %q, want a commit", rev)
			}
			if _, err := time.Parse(time.RFC3339, cfg.Config.Labels["org.opencontainers.image.created"]); err != nil {
				t.Errorf("label org.opencontainers.image.created: %v", err)
			}
			bin := binaryIn(t, files, m, cfg)
			released(t, file, d.Platform, bin)
			if p == runtime.GOOS+"/"+runtime.GOARCH {
				checkRuns(t, bin, p, versionLabel)
			}
		})
	}
}

// binaryIn checks the layers against the config's diff_ids and returns the
// plugin binary: the one file the layers hold, executable.
func binaryIn(t *testing.T, files map[string][]byte, m manifest, cfg imageConfig) []byte {
	t.Helper()
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		t.Fatalf("%d layers, %d diff_ids", len(m.Layers), len(cfg.RootFS.DiffIDs))
	}
	var bin []byte
	holding := 0
	for i, l := range m.Layers {
		if l.MediaType != mediaLayer {
			t.Errorf("layer %d media type %q, want %q", i, l.MediaType, mediaLayer)
		}
		zr, err := gzip.NewReader(bytes.NewReader(blob(t, files, l)))
		if err != nil {
			t.Fatalf("layer %d: %v", i, err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("layer %d: %v", i, err)
		}
		if got := fmt.Sprintf("sha256:%x", sha256.Sum256(raw)); got != cfg.RootFS.DiffIDs[i] {
			t.Errorf("layer %d uncompressed is %s, its diff_id %s", i, got, cfg.RootFS.DiffIDs[i])
		}
		tr := tar.NewReader(bytes.NewReader(raw))
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("layer %d: %v", i, err)
			}
			if hdr.Typeflag == tar.TypeDir {
				continue
			}
			if name := path.Clean("/" + hdr.Name); name != binaryPath || hdr.Typeflag != tar.TypeReg || hdr.Mode&0o111 == 0 {
				t.Errorf("layer %d holds %s (type %c, mode %o): the image holds only the executable %s", i, name, hdr.Typeflag, hdr.Mode, binaryPath)
				continue
			}
			holding++
			if bin, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if holding != 1 {
		t.Fatalf("%d layers hold %s, want one", holding, binaryPath)
	}
	return bin
}

// released compares the binary with goreleaser's for the platform, when
// the tarball lies in goreleaser's dist directory.
func released(t *testing.T, file string, p *platform, bin []byte) {
	t.Helper()
	dist := filepath.Dir(file)
	data, err := os.ReadFile(filepath.Join(dist, "artifacts.json"))
	if errors.Is(err, os.ErrNotExist) {
		t.Logf("no artifacts.json beside %s: not compared with the release's binary", file)
		return
	}
	var artifacts []struct {
		Type, Path, Goos, Goarch string
	}
	decode(t, data, &artifacts)
	for _, a := range artifacts {
		if a.Type == "Binary" && a.Goos == p.OS && a.Goarch == p.Architecture && path.Base(a.Path) == "kubectl-kubeadmcfg" {
			want, err := os.ReadFile(filepath.Join(filepath.Dir(dist), a.Path)) // relative to where goreleaser ran
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(bin, want) {
				t.Errorf("the image's binary (sha256 %x) is not goreleaser's %s (sha256 %x)", sha256.Sum256(bin), a.Path, sha256.Sum256(want))
			}
			return
		}
	}
	t.Errorf("%s names no %s/%s binary", filepath.Join(dist, "artifacts.json"), p.OS, p.Architecture)
}

// checkRuns runs the binary and checks it reports the labelled version.
func checkRuns(t *testing.T, bin []byte, p, versionLabel string) {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "kubectl-kubeadmcfg")
	if err := os.WriteFile(exe, bin, 0o700); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(exe, "version", "-o", "json")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("the image's binary: version -o json: %v: %s", err, errOut.String())
	}
	var info version.Info
	decode(t, out.Bytes(), &info)
	if info.Version != versionLabel || info.Platform != p {
		t.Errorf("the image's binary reports version %q on %s, want %q on %s", info.Version, info.Platform, versionLabel, p)
	}
}

func checkLabels(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got[k], v)
		}
	}
}

// readArchive reads the tarball's regular files, and checks that each blob
// is what its name says.
func readArchive(t *testing.T, file string) map[string][]byte {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = data
		if hex, ok := strings.CutPrefix(hdr.Name, "blobs/sha256/"); ok {
			if got := fmt.Sprintf("%x", sha256.Sum256(data)); got != hex {
				t.Errorf("blob %s holds content of digest %s", hdr.Name, got)
			}
		}
	}
	return files
}

// blob is the content a descriptor points at, checked against its size.
func blob(t *testing.T, files map[string][]byte, d descriptor) []byte {
	t.Helper()
	alg, hex, _ := strings.Cut(d.Digest, ":")
	data, ok := files["blobs/"+alg+"/"+hex]
	if !ok {
		t.Fatalf("no blob %s", d.Digest)
	}
	if int64(len(data)) != d.Size {
		t.Fatalf("blob %s is %d bytes, its descriptor says %d", d.Digest, len(data), d.Size)
	}
	return data
}

// daemonSetImage is the repository of the agent DaemonSet's image and the
// executable its command names.
func daemonSetImage(t *testing.T, file string) (repo, command string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
		var ds appsv1.DaemonSet
		if err := yaml.Unmarshal([]byte(doc), &ds); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if ds.Kind != "DaemonSet" {
			continue
		}
		c := ds.Spec.Template.Spec.Containers
		i := slices.IndexFunc(c, func(c corev1.Container) bool { return c.Name == "agent" })
		if i < 0 || len(c[i].Command) == 0 {
			t.Fatalf("%s: no agent container with a command", file)
		}
		repo = c[i].Image
		if colon := strings.LastIndex(repo, ":"); colon > strings.LastIndex(repo, "/") {
			repo = repo[:colon]
		}
		return repo, c[i].Command[0]
	}
	t.Fatalf("%s holds no DaemonSet", file)
	return "", ""
}

func decode(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decoding %T: %v", v, err)
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && cmp.Equal(x, y)
}
