package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// WaitVersion waits until each of components runs version on the node:
// its manifest names an image of that tag (etcd's release is its own, so
// its tag is not compared), the kubelet's mirror Pod carries that image,
// and the component is Ready with its probe answering for Settle, within
// opts.Wait each. It is the gate of an upgrade between two nodes, and the
// look at whether a node is back on the release it ran.
func WaitVersion(ctx context.Context, manifestsDir string, components []Component, version string, opts Options) error {
	a := newApplier(opts)
	for _, c := range components {
		m, err := ReadManifest(filepath.Join(manifestsDir, c.File()))
		if err != nil {
			return err
		}
		image := m.Pod.Spec.Containers[0].Image
		if tag := imageTag(image); c != Etcd && tag != version {
			return fmt.Errorf("%s: its manifest runs %s, not %s", c.PodName(), image, version)
		}
		if err := a.waitImage(ctx, c, m, image); err != nil {
			return err
		}
		if _, took, err := a.wait(ctx, c, m, "its manifest", func(string) bool { return true }, true); err != nil {
			a.emit(Event{Component: c, Kind: EventFailed, Message: err.Error(), Elapsed: took, Limit: opts.Wait})
			return err
		}
	}
	return nil
}

// waitImage waits, within Wait, until c's mirror Pod carries image: the
// kubelet runs the manifest that names it.
func (a *applier) waitImage(ctx context.Context, c Component, m *Manifest, image string) error {
	deadline := time.Now().Add(a.opts.Wait)
	last := "no mirror Pod"
	for {
		pod, err := a.mirrorPod(ctx, m)
		switch {
		case err != nil:
			last = "cannot read its mirror Pod: " + shortError(err)
		case pod != nil && len(pod.Spec.Containers) > 0 && pod.Spec.Containers[0].Image == image:
			return nil
		case pod != nil && len(pod.Spec.Containers) > 0:
			last = "its mirror Pod runs " + pod.Spec.Containers[0].Image
		}
		if !time.Now().Add(a.opts.Interval).Before(deadline) {
			return &UnhealthyError{Component: c, Wait: a.opts.Wait, Last: fmt.Sprintf("want %s: %s", image, last)}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while waiting for %s: %w", c.PodName(), ctx.Err())
		case <-time.After(a.opts.Interval):
		}
	}
}
