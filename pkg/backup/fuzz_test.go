package backup

import (
	"os"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
)

// FuzzRead feeds the backup reader damaged files: it may refuse them, never
// panic, and never call a damaged file's checksum good.
func FuzzRead(f *testing.F) {
	doc, _ := os.ReadFile("../../testdata/documents/v1beta4.yaml")
	f.Add(append(encodeHeader(meta()), doc...))
	f.Add([]byte(magic + "\n# server: x\n"))
	f.Add([]byte("not a backup"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := parse(data)
		if err != nil {
			return
		}
		_ = b.Verify(clusterconfig.ValidateOptions{})
		_ = b.ChecksumOK()
	})
}
