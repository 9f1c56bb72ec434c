// Command image builds the plugin's container image, the one the agent's
// DaemonSet runs, for every linux platform goreleaser built, without a
// Docker engine and without a registry. It builds with ko's builder, the
// ko that goreleaser links (pinned in this module), on an empty base: the
// plugin is a static binary and needs nothing else. Neither ko's command
// nor goreleaser's kos pipe can do this offline: both take their base
// image only from a registry or a Docker engine, and a goreleaser snapshot
// publishes only to a Docker engine. The result is one multi-platform OCI
// image layout in a tarball, the bytes the release pushes.
//
// The image must carry the binaries of the release archives, not others
// built alike: it is stamped with the version, commit and date goreleaser's
// binary for this machine reports, built with goreleaser's flags, and each
// platform's binary in the image is compared with goreleaser's, byte for
// byte.
//
//	go run -C hack/tools/release ./image -dist DIST -o FILE [flags] MODULE_DIR
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// The plugin's main package, and where the image puts it (ko's layout).
const (
	importPath = "github.com/kubeadmcfg/kubectl-kubeadmcfg/cmd/kubectl-kubeadmcfg"
	binaryPath = "/ko-app/kubectl-kubeadmcfg"
)

type options struct {
	root     string
	dist     string
	out      string
	repo     string
	source   string
	revision string
	created  int64
	user     string
}

func main() {
	// ko logs its template data's git state (no tags, a dirty tree): not
	// what this build stamps, so not worth a line. Its errors come back.
	log.SetOutput(io.Discard)
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	o := options{}
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dist, "dist", "dist", "goreleaser's output directory (artifacts.json names the binaries)")
	fs.StringVar(&o.out, "o", "", "the OCI image layout tarball to write")
	fs.StringVar(&o.repo, "repo", "ghcr.io/kubeadmcfg/kubectl-kubeadmcfg", "the repository the image is named in (the DaemonSet's image)")
	fs.StringVar(&o.source, "source", "https://github.com/kubeadmcfg/kubectl-kubeadmcfg", "the source repository (label org.opencontainers.image.source)")
	fs.StringVar(&o.revision, "revision", "", "the commit the image is built from (label org.opencontainers.image.revision)")
	fs.Int64Var(&o.created, "created", 0, "the commit's time in seconds since the epoch: the image's creation time, so that a rebuild of a commit is the same image")
	fs.StringVar(&o.user, "user", "65532", "the user the image runs as when a Pod does not say (the agent's DaemonSet runs it as root)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch fs.NArg() {
	case 0:
		o.root = "."
	case 1:
		o.root = fs.Arg(0)
	default:
		return errors.New("one module directory at most")
	}
	if o.out == "" || o.revision == "" || o.created <= 0 {
		return errors.New("-o, -revision and -created are required (hack/dist.sh passes them)")
	}
	return buildImage(ctx, o, stderr)
}

// buildImage builds the image from the binaries in o.dist and writes it to o.out.
func buildImage(ctx context.Context, o options, stderr io.Writer) error {
	bins, err := linuxBinaries(o.root, o.dist)
	if err != nil {
		return err
	}
	stamp, err := readStamp(bins)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(o.repo + ":" + imageTag(stamp.Version))
	if err != nil {
		return fmt.Errorf("version %q makes no image tag: %w", stamp.Version, err)
	}
	created := time.Unix(o.created, 0).UTC()
	meta := map[string]string{
		"org.opencontainers.image.title":       "kubectl-kubeadmcfg",
		"org.opencontainers.image.description": "kubectl kubeadmcfg: the rollout agent of a kubeadm control plane, and the plugin itself",
		"org.opencontainers.image.source":      o.source,
		"org.opencontainers.image.version":     stamp.Version,
		"org.opencontainers.image.revision":    o.revision,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
	}
	fmt.Fprintf(stderr, "image: building %s %s with ko\n", tag.Name(), strings.Join(platformNames(bins), ", "))
	idx, err := koBuild(ctx, o.root, bins, stamp, meta, o.user, created)
	if err != nil {
		return err
	}
	if err := sameBinaries(idx, bins); err != nil {
		return err
	}
	if err := writeArchive(o.out, idx, tag, created); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "image: %s (%s@%s, %s)\n", o.out, tag.Name(), digest, strings.Join(platformNames(bins), ", "))
	return nil
}

// imageTag is the tag of a version: the release tag (v0.2.0). A snapshot's
// build metadata (0.2.1-dev+abc1234) has a "+", which no image tag may
// hold; it becomes "_", as Helm does for OCI tags.
func imageTag(version string) string {
	return "v" + strings.ReplaceAll(version, "+", "_")
}
