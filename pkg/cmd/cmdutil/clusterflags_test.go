package cmdutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// The expiry of the client certificate a kubeconfig authenticates with,
// embedded or in a file; none for a token.
func TestCertificateExpiry(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	notAfter := time.Date(2027, 12, 2, 1, 0, 16, 0, time.UTC)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubeadmcfg-agent:cp-0", Organization: []string{"kubeadmcfg:agents"}},
		NotBefore: notAfter.Add(-365 * 24 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	file := filepath.Join(t.TempDir(), "agent.crt")
	if err := os.WriteFile(file, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		config rest.Config
		want   time.Time
		ok     bool
	}{
		{"embedded", rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: certPEM}}, notAfter, true},
		{"in a file", rest.Config{TLSClientConfig: rest.TLSClientConfig{CertFile: file}}, notAfter, true},
		{"a token", rest.Config{BearerToken: "t"}, time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := (&Clients{Config: &tc.config}).CertificateExpiry()
			if err != nil || ok != tc.ok || !got.Equal(tc.want) {
				t.Errorf("got %v %v %v, want %v %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
	if _, _, err := (&Clients{Config: &rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: []byte("not pem")}}}).CertificateExpiry(); err == nil {
		t.Error("a certificate that is not PEM")
	}
}
