package main

import (
	"context"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/ko/pkg/build"
)

// versionPkg is where .goreleaser.yaml's ldflags stamp the version.
const versionPkg = "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/version"

// koBuild builds the plugin with ko for every platform in bins, on an empty
// base, with .goreleaser.yaml's flags, ldflags and env: the same bytes.
// meta goes in as labels (the image config) and annotations (the index and
// the manifests, where registries such as GHCR read them for a
// multi-platform image).
func koBuild(ctx context.Context, root string, bins []binary, s stamp, meta map[string]string, user string, created time.Time) (v1.ImageIndex, error) {
	platforms := make([]v1.Platform, 0, len(bins))
	specs := make([]string, 0, len(bins))
	for _, b := range bins {
		platforms = append(platforms, b.platform)
		specs = append(specs, b.platform.String())
	}
	base, err := emptyBase(platforms)
	if err != nil {
		return nil, err
	}
	// ko records a base image's name in the image's annotations: an empty
	// base has none, so it goes by the name a Dockerfile gives it.
	baseRef, err := name.ParseReference("scratch", name.WithDefaultRegistry(""))
	if err != nil {
		return nil, err
	}
	at := v1.Time{Time: created}
	opts := []build.Option{
		build.WithPlatforms(specs...),
		build.WithBaseImages(func(context.Context, string) (name.Reference, build.Result, error) {
			return baseRef, base, nil
		}),
		build.WithConfig(map[string]build.Config{importPath: {
			// As .goreleaser.yaml's build.
			Env:   []string{"CGO_ENABLED=0"},
			Flags: []string{"-trimpath"},
			Ldflags: []string{
				"-s -w",
				"-X " + versionPkg + ".Version=" + s.Version,
				"-X " + versionPkg + ".Commit=" + s.Commit,
				"-X " + versionPkg + ".Date=" + s.Date,
			},
		}}),
		build.WithCreationTime(at),
		build.WithKoDataCreationTime(at),
		build.WithUser(user),
		// An SBOM is an attachment ko pushes beside the image in a
		// registry; a tarball has no place for it, and `go version -m` on
		// the binary lists the same modules.
		build.WithDisabledSBOM(),
	}
	for k, v := range meta {
		opts = append(opts, build.WithLabel(k, v), build.WithAnnotation(k, v))
	}
	builder, err := build.NewGo(ctx, root, opts...)
	if err != nil {
		return nil, fmt.Errorf("ko: %w", err)
	}
	res, err := builder.Build(ctx, importPath)
	if err != nil {
		return nil, fmt.Errorf("ko: %w", err)
	}
	idx, ok := res.(v1.ImageIndex)
	if !ok {
		return nil, fmt.Errorf("ko built a single image for %v, not an index", specs)
	}
	return idx, nil
}

// emptyBase is an index of one empty OCI image per platform: no layer, a
// config that names only the platform. ko builds one image on each.
func emptyBase(platforms []v1.Platform) (v1.ImageIndex, error) {
	adds := make([]mutate.IndexAddendum, 0, len(platforms))
	for _, p := range platforms {
		img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = p.OS, p.Architecture
		img, err = mutate.ConfigFile(img, cf)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}
