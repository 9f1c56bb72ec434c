package controlplane

import (
	"errors"
	"os"
	"path/filepath"
)

// replaceManifest puts data at path atomically: a temporary file in the
// same directory, synced, renamed over path, and the directory synced. The
// temporary file's name starts with a dot because the kubelet ignores such
// files in the manifests directory and would run anything else.
func replaceManifest(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".kubeadmcfg-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Chmod(0o600), tmp.Sync(), tmp.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
