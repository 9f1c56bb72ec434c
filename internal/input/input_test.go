package input

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReadIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		err  error
	}{
		{"2 MiB", MaxBytes, nil},
		{"2 MiB and 1 byte", MaxBytes + 1, ErrTooLarge},
		{"empty", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := bytes.Repeat([]byte{'x'}, tc.size)
			// A stream (stdin, a pipe): only the limit stops it.
			got, err := Read(io.MultiReader(bytes.NewReader(data)))
			if !errors.Is(err, tc.err) || (err == nil && len(got) != tc.size) {
				t.Errorf("stream: %d bytes, %v; want %v", len(got), err, tc.err)
			}
			// A regular file, by name.
			path := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err = ReadFile(path)
			if !errors.Is(err, tc.err) || (err == nil && len(got) != tc.size) {
				t.Errorf("file: %d bytes, %v; want %v", len(got), err, tc.err)
			}
		})
	}
}

// A regular file is measured before it is read: a sparse terabyte is
// refused without a byte read.
func TestReadMeasuresARegularFileFirst(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 40); err != nil {
		t.Skipf("no sparse file here: %v", err)
	}
	if _, err := Read(f); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if off, _ := f.Seek(0, io.SeekCurrent); off != 0 {
		t.Errorf("%d bytes were read before refusing", off)
	}
}

// /dev/zero never ends: the limit ends the read.
func TestReadDevZero(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		_, err := ReadFile("/dev/zero")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "read /dev/zero: larger than 2 MiB") {
			t.Fatalf("got %v, want ErrTooLarge naming the file", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("reading /dev/zero did not end")
	}
}

func TestReadFileErrorsNameThePath(t *testing.T) {
	_, err := ReadFile(filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, os.ErrNotExist) || Refused(err) {
		t.Fatalf("got %v, want a not-exist error that is not a refusal", err)
	}
}
