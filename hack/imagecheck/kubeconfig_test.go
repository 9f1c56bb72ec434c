package imagecheck

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const kubeconfigRecipe = "../../deploy/kubeadmcfg-agent-kubeconfig.sh"

// testCA is a CA that signs the agent's client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// kubeconfig is an agent's kubeconfig as `kubeadm kubeconfig user` writes
// it: a client certificate of kubeadmcfg-agent:cp-0 signed by ca, valid
// for the given time, and server.
func (ca *testCA) kubeconfig(t *testing.T, server string, valid time.Duration) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial,
		Subject:   pkix.Name{CommonName: "kubeadmcfg-agent:cp-0", Organization: []string{"kubeadmcfg:agents"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(valid),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(typ string, der []byte) string {
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	return fmt.Sprintf(`apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: %s
    server: %s
  name: kubernetes
contexts:
- context:
    cluster: kubernetes
    user: kubeadmcfg-agent:cp-0
  name: kubeadmcfg-agent:cp-0@kubernetes
current-context: kubeadmcfg-agent:cp-0@kubernetes
kind: Config
users:
- name: kubeadmcfg-agent:cp-0
  user:
    client-certificate-data: %s
    client-key-data: %s
`, base64.StdEncoding.EncodeToString(ca.pem), server, b64("CERTIFICATE", der), b64("EC PRIVATE KEY", keyDER))
}

// Review S3: the renewal recipe, run as the timer's service runs it
// (--renew-before 30 --restart), with a kubectl that reads kubeadm-config
// and a kubeadm that writes a kubeconfig of the cluster's CA and its
// controlPlaneEndpoint. It keeps a kubeconfig that verifies against the
// cluster's CA, names that endpoint and has more than 30 days left, and
// renews one that expires sooner, was signed by a CA since rotated, or
// names another server; the file it writes is 0600 whatever an
// interrupted run left as .new.
func TestAgentKubeconfigRenewal(t *testing.T) {
	for _, tool := range []string{"bash", "openssl", "flock", "base64"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the recipe needs %s: %v", tool, err)
		}
	}
	const endpoint = "https://cp.example.org:6443"
	cluster, rotatedAway := newTestCA(t, "kubernetes"), newTestCA(t, "kubernetes (before the rotation)")
	for _, tc := range []struct {
		name    string
		old     string // the kubeconfig on the node
		leftNew os.FileMode
		renewed bool
		says    string
	}{
		{"a year left, the cluster's CA, its endpoint", cluster.kubeconfig(t, endpoint, 365*24*time.Hour), 0, false,
			"names " + endpoint + " and verifies against the cluster's CA, valid until "},
		{"10 days left", cluster.kubeconfig(t, endpoint, 10*24*time.Hour), 0, true,
			"; the old one: its certificate expires within 30 days) and restarted kubeadmcfg-agent.service"},
		{"signed by a CA rotated since", rotatedAway.kubeconfig(t, endpoint, 365*24*time.Hour), 0, true,
			"; the old one: its certificate does not verify against the cluster's CA "},
		{"another server", cluster.kubeconfig(t, "https://192.0.2.10:6443", 365*24*time.Hour), 0, true,
			"; the old one: it names https://192.0.2.10:6443, not " + endpoint + ") and restarted"},
		{"a .new left 0644 by an interrupted run", cluster.kubeconfig(t, endpoint, 10*24*time.Hour), 0o644, true,
			"; the old one: its certificate expires within 30 days) and restarted kubeadmcfg-agent.service"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, bin := t.TempDir(), t.TempDir()
			etc := filepath.Join(root, "etc", "kubernetes")
			for _, d := range []string{filepath.Join(etc, "manifests"), filepath.Join(etc, "pki"), filepath.Join(root, "tmp")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			write := func(path, data string, mode os.FileMode) {
				t.Helper()
				if err := os.WriteFile(path, []byte(data), mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, mode); err != nil {
					t.Fatal(err)
				}
			}
			fresh := cluster.kubeconfig(t, endpoint, 365*24*time.Hour)
			write(filepath.Join(etc, "pki", "ca.crt"), string(cluster.pem), 0o644)
			write(filepath.Join(etc, "admin.conf"), "admin\n", 0o600)
			write(filepath.Join(etc, "manifests", "kube-apiserver.yaml"),
				"metadata:\n  annotations:\n    kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint: 192.0.2.10:6443\n", 0o600)
			out := filepath.Join(etc, "kubeadmcfg-agent.conf")
			write(out, tc.old, 0o600)
			if tc.leftNew != 0 {
				write(out+".new", "left by an interrupted run\n", tc.leftNew)
			}
			write(filepath.Join(bin, "fresh.conf"), fresh, 0o600)
			log := filepath.Join(bin, "calls.log")
			write(filepath.Join(bin, "kubectl"), "#!/bin/sh\nprintf 'apiVersion: kubeadm.k8s.io/v1beta4\\nkind: ClusterConfiguration\\ncontrolPlaneEndpoint: cp.example.org:6443\\n'\n", 0o755)
			write(filepath.Join(bin, "kubeadm"), "#!/bin/sh\necho kubeadm \"$@\" >>"+log+"\ncat "+filepath.Join(bin, "fresh.conf")+"\n", 0o755)
			write(filepath.Join(bin, "systemctl"), "#!/bin/sh\necho systemctl \"$@\" >>"+log+"\n", 0o755)

			cmd := exec.Command(kubeconfigRecipe, "--rootfs", root, "--node", "cp-0", "--renew-before", "30", "--restart", "kubeadmcfg-agent.service")
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("the recipe failed: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.says) {
				t.Errorf("the recipe said %q, want ...%s...", stdout.String(), tc.says)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			calls, _ := os.ReadFile(log)
			restarted := strings.Contains(string(calls), "systemctl try-restart kubeadmcfg-agent.service")
			switch {
			case tc.renewed && (string(got) != fresh || !restarted):
				t.Errorf("not renewed (restarted: %v)", restarted)
			case !tc.renewed && (string(got) != tc.old || restarted):
				t.Errorf("renewed (restarted: %v)", restarted)
			}
			st, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s is %o, want 0600: it holds the private key", out, st.Mode().Perm())
			}
			if _, err := os.Stat(out + ".new"); tc.renewed && err == nil {
				t.Errorf("%s.new is left", out)
			}
		})
	}
}
