// Package input is where what the plugin reads comes in: files and stdin,
// the store's backups and records, static Pod manifests, and the YAML in
// them. Every read is bounded by MaxBytes, and YAML becomes JSON only once
// what its anchors and aliases expand to is known to stay within a small
// multiple of the text (Check): kubeadm reads anchors and aliases, so the
// plugin does too, but through them an 11 KB file can expand to 100 MB.
// The domain packages and the cobra layer all read through here, so the
// limits are the same everywhere.
package input

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// MaxBytes bounds every input: twice the 1 MiB a ConfigMap holds, so that
// anything the plugin writes or backs up, with comments around it, fits.
const MaxBytes = 2 << 20

// ErrTooLarge is an input of more than MaxBytes.
var ErrTooLarge = errors.New("larger than 2 MiB, the limit for any input (twice what a ConfigMap holds)")

// Read reads r to its end, or fails with ErrTooLarge as soon as it has
// given more than MaxBytes, so that an endless stream (/dev/zero, a pipe
// that never closes its end with data) ends promptly. A regular file (an
// *os.File, which has Stat) is measured before a byte is read.
func Read(r io.Reader) ([]byte, error) {
	if f, ok := r.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxBytes {
			return nil, ErrTooLarge
		}
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxBytes {
		return nil, ErrTooLarge
	}
	return data, nil
}

// ReadFile is os.ReadFile with Read's limit. An error is an *fs.PathError
// naming path, as os.ReadFile's are; errors.Is(err, ErrTooLarge) tells an
// input that is too large.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := Read(f)
	if err != nil {
		var pathErr *fs.PathError
		if !errors.As(err, &pathErr) {
			err = &fs.PathError{Op: "read", Path: path, Err: err}
		}
		return nil, err
	}
	return data, nil
}

// Refused reports whether err is an input this package refuses to read:
// one too large, or YAML whose aliases expand it past the bound. Such an
// input is invalid whatever it holds, not unreadable.
func Refused(err error) bool {
	var expansion *ExpansionError
	return errors.Is(err, ErrTooLarge) || errors.As(err, &expansion)
}
