//go:build !unix

package backup

import (
	"io/fs"
	"os"
)

// Without Unix owners and modes (Windows), the store trusts what the
// platform's ACLs allow: a backup directory and its files are checked for
// symlinks and for being what they claim, not for who may write them.

func owner(fs.FileInfo) int { return os.Geteuid() }

func writableByOthers(fs.FileInfo) bool { return false }

func openNoFollow(path string) (*os.File, error) { return os.Open(path) }

func checkAncestors(string) error { return nil }
