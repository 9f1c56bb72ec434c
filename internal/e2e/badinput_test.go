package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// badInput is one wrong command line or wrong world: the exit code it must
// give, with one clear line on stderr and no write.
type badInput struct {
	name string
	args []string // plugin arguments; connection flags are added
	code int
	as   string // kubeconfig context (default admin)
	bare bool   // do not add --kubeconfig/--context/-n
}

// TestBadInput runs every bad input through the real kubectl and asserts the
// exit code, one error line on stderr, an unchanged resourceVersion, and no
// credential anywhere in the output. A write by one shows in the
// resourceVersion that the others check too.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	fixtures := t.TempDir()
	file := func(name string, data []byte) string {
		p := filepath.Join(fixtures, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	emptyFile := file("empty.yaml", nil)
	binaryFile := file("binary.bin", []byte{0x00, 0xff, 0xfe, 0x01, 0x02, 0x9c})
	invalidDoc := file("invalid.yaml", []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\nnetworking: {podSubnet: 10.0.0.0/33}\n"))
	tooBig := file("too-big.yaml", []byte(fmt.Sprintf("apiServer:\n  certSANs: [%s]\n",
		strings.TrimSuffix(strings.Repeat("a-long-name-for-a-certificate-subject-alternative.example.com,", 20000), ","))))
	notADir := file("not-a-dir", []byte("x"))
	symlinkDir := filepath.Join(fixtures, "backups-link")
	if err := os.Symlink(t.TempDir(), symlinkDir); err != nil {
		t.Fatal(err)
	}
	wrongCA := file("wrong-ca.crt", selfSignedCA(t))

	// Backups: a good one, a corrupted one, one of another cluster's
	// ConfigMap, one of another kubernetesVersion.
	backups := t.TempDir()
	good := strings.TrimSpace(e.plugin("backup", "--backup-dir", backups).stdout)
	corrupt := filepath.Join(backups, strings.Replace(filepath.Base(good), "-rv", "9-rv", 1))
	data, _ := os.ReadFile(good)
	_ = os.WriteFile(corrupt, append(data[:len(data)-20:len(data)-20], []byte("tampered\n")...), 0o600)
	foreign := writeForeignBackup(t, backups, data, "uid: ", "uid: 00000000-0000-0000-0000-000000000000")
	otherVersion := t.TempDir()
	wantExit(t, e.plugin("patch", "--no-backup", "--set", "kubernetesVersion=v1.37.3"), 0)
	other := strings.TrimSpace(e.plugin("backup", "--backup-dir", otherVersion).stdout)
	wantExit(t, e.plugin("patch", "--no-backup", "--set", "kubernetesVersion=v1.37.2"), 0)
	emptyBackups := t.TempDir()

	junk := newEnvWith(t, map[string]string{"ClusterConfiguration": "apiServer: [unclosed\n"})
	foreignKind := newEnvWith(t, map[string]string{"ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta2\nkind: ClusterConfiguration\n"})

	cases := []badInput{
		// patch: edits that cannot be applied
		{"no edits", []string{"patch"}, 2, "", false},
		{"set without value", []string{"patch", "--set", "novalue"}, 2, "", false},
		{"set with empty path", []string{"patch", "--set", "=x"}, 2, "", false},
		{"path with empty key", []string{"patch", "--set", "a..b=1"}, 2, "", false},
		{"path with a bad index", []string{"patch", "--set", "a[x]=1"}, 2, "", false},
		{"path with an open bracket", []string{"patch", "--set", "a[=1"}, 2, "", false},
		{"index out of range", []string{"patch", "--set", "apiServer.certSANs[9]=x"}, 2, "", false},
		{"key into a string", []string{"patch", "--set", "clusterName.x=1"}, 2, "", false},
		{"key into a list", []string{"patch", "--set", "apiServer.certSANs.x=1"}, 2, "", false},
		{"unparsable value", []string{"patch", "--set", "x={a: [}"}, 2, "", false},
		{"unset with a bad path", []string{"patch", "--unset", "a]b"}, 2, "", false},
		{"change apiVersion", []string{"patch", "--set", "apiVersion=kubeadm.k8s.io/v1"}, 2, "", false},
		{"change kind", []string{"patch", "--set", "kind=InitConfiguration"}, 2, "", false},
		{"malformed YAML patch", []string{"patch", "-p", "{a: [}"}, 2, "", false},
		{"malformed JSON patch", []string{"patch", "-p", `{"a": "unterminated}`}, 2, "", false},
		{"duplicate keys in a patch", []string{"patch", "-p", "a: 1\na: 2\n"}, 2, "", false},
		{"merge patch that is a list", []string{"patch", "-p", "[1, 2]"}, 2, "", false},
		{"empty patch", []string{"patch", "-p", ""}, 2, "", false},
		{"merge patch changing apiVersion", []string{"patch", "-p", `{"apiVersion":"kubeadm.k8s.io/v1"}`}, 2, "", false},
		{"json patch that is not a list", []string{"patch", "--type", "json", "-p", `{"op":"add"}`}, 2, "", false},
		{"json patch on a missing path", []string{"patch", "--type", "json", "-p", `[{"op":"remove","path":"/nothing"}]`}, 2, "", false},
		{"json patch replacing a missing key", []string{"patch", "--type", "json", "-p", `[{"op":"replace","path":"/nothing/here","value":1}]`}, 2, "", false},
		{"json patch with an unknown op", []string{"patch", "--type", "json", "-p", `[{"op":"bogus","path":"/x"}]`}, 2, "", false},
		{"json patch failing its test", []string{"patch", "--type", "json", "-p", `[{"op":"test","path":"/clusterName","value":"other"}]`}, 4, "", false},
		{"strategic merge patch", []string{"patch", "--type", "strategic", "-p", "{}"}, 2, "", false},
		{"missing patch file", []string{"patch", "--patch-file", filepath.Join(fixtures, "missing.yaml")}, 2, "", false},
		{"empty patch file", []string{"patch", "--patch-file", emptyFile}, 2, "", false},
		{"binary patch file", []string{"patch", "--patch-file", binaryFile}, 2, "", false},
		{"patch file that is a directory", []string{"patch", "--patch-file", fixtures}, 2, "", false},
		// patch: results kubeadm would reject
		{"bad CIDR", []string{"patch", "--set", "networking.podSubnet=10.0.0.0/33"}, 3, "", false},
		{"unknown field", []string{"patch", "--set", "unknownField=1"}, 3, "", false},
		{"wrong type", []string{"patch", "-p", `{"clusterName": 5}`}, 3, "", false},
		{"wrong extraArgs shape", []string{"patch", "-p", `{"apiServer":{"extraArgs":{"v":"2"}}}`}, 3, "", false},
		{"service subnet too large", []string{"patch", "--set", "networking.serviceSubnet=10.0.0.0/8"}, 3, "", false},
		{"unknown feature gate", []string{"patch", "--set", `featureGates["Bogus"]=true`}, 3, "", false},
		{"relative certificatesDir", []string{"patch", "--set", "certificatesDir=pki"}, 3, "", false},
		{"local and external etcd", []string{"patch", "--set", "etcd.external.endpoints[+]=https://10.0.0.1:2379"}, 3, "", false},
		{"kubernetesVersion below kubeadm's minimum", []string{"patch", "--set", "kubernetesVersion=v1.30.0"}, 3, "", false},
		{"bad controlPlaneEndpoint", []string{"patch", "--set", "controlPlaneEndpoint=LB.Example.com:6443"}, 3, "", false},
		{"document over the ConfigMap size limit", []string{"patch", "--patch-file", tooBig}, 3, "", false},
		// flags
		{"bad --dry-run", []string{"patch", "--set", "x=1", "--dry-run=maybe"}, 2, "", false},
		{"bad --validate", []string{"patch", "--set", "x=1", "--validate=sometimes"}, 2, "", false},
		{"negative --timeout", []string{"patch", "--set", "x=1", "--timeout=-1s"}, 2, "", false},
		{"unparsable --timeout", []string{"patch", "--set", "x=1", "--timeout=soon"}, 2, "", false},
		{"unknown output format", []string{"get", "-o", "table"}, 2, "", false},
		{"bad jsonpath", []string{"get", "-o", "jsonpath={.x"}, 2, "", false},
		{"--if-leader without a slash", []string{"patch", "--set", "x=1", "--if-leader", "lease"}, 2, "", false},
		{"--if-leader lease missing", []string{"patch", "--set", "clusterName=x", "--if-leader", e.ns + "/missing"}, 5, "", false},
		{"bad --kubeadm-version", []string{"validate", "--kubeadm-version", "banana"}, 2, "", false},
		{"--queue-ttl too short", []string{"patch", "--set", "x=1", "--queue-ttl", "1ms"}, 2, "", false},
		{"--keep 0", []string{"patch", "--set", "x=1", "--keep", "0"}, 2, "", false},
		{"unknown flag", []string{"get", "--bogus"}, 2, "", false},
		{"unknown command", []string{"frobnicate"}, 2, "", false},
		{"unexpected argument", []string{"get", "extra"}, 2, "", false},
		// what the plugin reads
		{"missing ConfigMap", []string{"patch", "--set", "clusterName=x", "--configmap", "missing"}, 5, "", false},
		{"missing key", []string{"get", "--key", "Missing"}, 5, "", false},
		{"missing namespace", []string{"get", "-n", "no-such-namespace", "--kubeconfig", s.cluster.Kubeconfig}, 5, "", true},
		{"key holding junk, decoded", []string{"get", "-o", "json", "-n", junk.ns, "--kubeconfig", s.cluster.Kubeconfig}, 3, "", true},
		{"key holding junk, patched", []string{"patch", "--set", "clusterName=x", "-n", junk.ns, "--kubeconfig", s.cluster.Kubeconfig}, 3, "", true},
		{"key holding junk, validated", []string{"validate", "-n", junk.ns, "--kubeconfig", s.cluster.Kubeconfig}, 3, "", true},
		{"unknown apiVersion stored", []string{"patch", "--set", "clusterName=x", "-n", foreignKind.ns, "--kubeconfig", s.cluster.Kubeconfig}, 3, "", true},
		// validate files
		{"validate a missing file", []string{"validate", "-f", filepath.Join(fixtures, "missing.yaml")}, 2, "", false},
		{"validate an invalid document", []string{"validate", "-f", invalidDoc}, 3, "", false},
		{"validate an empty file (kubeadm accepts it)", []string{"validate", "-f", emptyFile}, 0, "", false},
		{"validate a binary file", []string{"validate", "-f", binaryFile}, 3, "", false},
		// backups
		{"verify without names", []string{"backup", "verify", "--backup-dir", backups}, 2, "", false},
		{"verify a name that is not a backup", []string{"backup", "verify", "../../etc/passwd", "--backup-dir", backups}, 2, "", false},
		{"verify a missing backup", []string{"backup", "verify", "20261129T000000.000000000Z-kubeadm-config-rv1-00000000.yaml", "--backup-dir", backups}, 5, "", false},
		{"verify a corrupted backup", []string{"backup", "verify", filepath.Base(corrupt), "--backup-dir", backups}, 3, "", false},
		{"restore a corrupted backup", []string{"restore", filepath.Base(corrupt), "--backup-dir", backups, "--force"}, 3, "", false},
		{"restore another ConfigMap's backup", []string{"restore", filepath.Base(foreign), "--backup-dir", backups}, 4, "", false},
		{"restore across an upgrade", []string{"restore", filepath.Base(other), "--backup-dir", otherVersion}, 4, "", false},
		{"restore with no backups", []string{"restore", "--latest", "--backup-dir", emptyBackups}, 5, "", false},
		{"restore a name and --latest", []string{"restore", filepath.Base(good), "--latest", "--backup-dir", backups}, 2, "", false},
		{"node values without --to-file", []string{"restore", "--latest", "--backup-dir", backups, "--node-name", "n"}, 2, "", false},
		{"bad --advertise-address", []string{"restore", "--latest", "--backup-dir", backups, "--to-file", filepath.Join(fixtures, "k.yaml"), "--advertise-address", "not-an-ip"}, 2, "", false},
		{"symlinked backup directory", []string{"patch", "--set", "clusterName=x", "--backup-dir", symlinkDir}, 2, "", false},
		{"unwritable backup directory", []string{"patch", "--set", "clusterName=x", "--backup-dir", filepath.Join(notADir, "backups")}, 1, "", false},
		// upgrade state
		{"misspelt state", []string{"upgrade-set", "Upgrade Finished"}, 2, "", false},
		{"misspelt host status", []string{"upgrade-host", "controller-1", "Happy!"}, 2, "", false},
		{"run without --", []string{"upgrade-run", "downloading-images", "true"}, 2, "", false},
		{"run without a command", []string{"upgrade-run", "downloading-images", "--"}, 2, "", false},
		{"run with no upgrade", []string{"upgrade-run", "downloading-images", "--", "true"}, 5, "", false},
		{"plan file missing", []string{"upgrade-start", "--to", "v1.37.3", "--plan", filepath.Join(fixtures, "no-plan.yaml")}, 2, "", false},
		{"plan file not a plan", []string{"upgrade-start", "--to", "v1.37.3", "--plan", binaryFile}, 3, "", false},
		{"plan without nodes", []string{"upgrade-start", "--to", "v1.37.3", "--plan", "kubeadm"}, 5, "", false},
		{"plan show current with no upgrade", []string{"upgrade-plan", "show", "--current"}, 5, "", false},
		{"negative --stale-after", []string{"upgrade-audit", "--stale-after", "-1s"}, 2, "", false},
		{"host without a status", []string{"upgrade-host", "controller-1"}, 2, "", false},
		{"set with no upgrade", []string{"upgrade-set", "downloading-images"}, 5, "", false},
		{"fail with no upgrade", []string{"upgrade-fail"}, 5, "", false},
		{"status with no upgrade", []string{"upgrade-status"}, 5, "", false},
		{"bad --to version", []string{"upgrade-start", "--to", "1.37"}, 2, "", false},
		{"unparsable --stuck-after", []string{"upgrade-audit", "--stuck-after", "a while"}, 2, "", false},
		{"negative --stuck-after", []string{"upgrade-audit", "--stuck-after", "-1h"}, 2, "", false},
		// who and where
		{"unprivileged user", []string{"patch", "--set", "clusterName=x"}, 6, testcluster.UnprivilegedContext, false},
		{"unprivileged user reading", []string{"upgrade-status"}, 6, testcluster.UnprivilegedContext, false},
		{"wrong token", []string{"get", "--kubeconfig", s.cluster.Kubeconfig, "-n", e.ns, "--token", "not-a-valid-token"}, 6, "", true},
		{"unreachable server", []string{"get", "--server", "https://127.0.0.1:1", "--insecure-skip-tls-verify", "--token", "x", "--request-timeout", "5s"}, 1, "", true},
		{"TLS error", []string{"get", "--server", s.cluster.URL, "--certificate-authority", wrongCA, "--token", s.cluster.AdminToken}, 1, "", true},
		{"missing kubeconfig", []string{"get", "--kubeconfig", filepath.Join(fixtures, "no-kubeconfig")}, 1, "", true},
	}
	if len(cases) < 60 {
		t.Fatalf("only %d bad inputs", len(cases))
	}
	secrets := []string{s.cluster.AdminToken, s.cluster.UserToken, "not-a-valid-token"}
	// None writes, so they run side by side (go test -parallel), each
	// through a view of the test's namespace of its own.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := &env{t: t, ns: e.ns}
			rv := e.configMapRV()
			var r result
			switch {
			case tc.bare:
				r = run(t, "kubectl", append([]string{"kubeadmcfg"}, tc.args...)...)
			case tc.as != "":
				r = e.kubectlAs(tc.as, append([]string{"kubeadmcfg"}, tc.args...)...)
			default:
				r = e.plugin(tc.args...)
			}
			wantExit(t, r, tc.code)
			if got := e.configMapRV(); got != rv {
				t.Fatalf("resourceVersion %s -> %s: bad input was written", rv, got)
			}
			for _, secret := range secrets {
				if strings.Contains(r.stdout+r.stderr, secret) {
					t.Fatalf("a credential leaked into the output: %s", r)
				}
			}
		})
	}
}

// writeForeignBackup writes a copy of a backup with one header field
// changed, as if taken from another cluster (its checksum still holds).
func writeForeignBackup(t *testing.T, dir string, data []byte, field, replacement string) string {
	t.Helper()
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "# "+field) {
			lines[i] = "# " + replacement
		}
	}
	name := time.Now().UTC().Format("20060102T150405.000000000Z") + "-kubeadm-config-rv1-0f0f0f0f.yaml"
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// selfSignedCA is a CA the apiserver's certificate was not signed by.
func selfSignedCA(t *testing.T) []byte {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not the cluster CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
