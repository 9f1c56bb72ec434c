package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// cp copies as `cp [-r] SRC DST` does, which is all kubeadm asks of it
// (util/files CopyDir runs `cp -r SRC DST`): a DST that is a directory
// receives SRC under its own name, DST/base(SRC); otherwise SRC is copied
// to DST. A directory needs -r. Modes are kept, owners and times are not,
// and symbolic links are copied as links, as cp -r does.
func cp(args []string) error {
	recursive := false
	var paths []string
	for _, a := range args {
		switch {
		case a == "-r" || a == "-R":
			recursive = true
		case len(a) > 1 && a[0] == '-':
			return fmt.Errorf("unsupported option %s: only -r", a)
		default:
			paths = append(paths, a)
		}
	}
	if len(paths) != 2 {
		return errors.New("usage: cp [-r] SRC DST")
	}
	src, dst := paths[0], paths[1]
	info, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if info.IsDir() && !recursive {
		return fmt.Errorf("-r not specified; omitting directory %s", src)
	}
	if d, err := os.Stat(dst); err == nil && d.IsDir() {
		dst = filepath.Join(dst, filepath.Base(filepath.Clean(src)))
	}
	return copyTree(src, dst)
}

// copyTree copies src, a file, link or directory, to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, info.Mode().Perm()); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			return copyFile(path, target, info.Mode().Perm())
		}
		return fmt.Errorf("%s is not a regular file, directory or link", path)
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
