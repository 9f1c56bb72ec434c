package uploadconfig

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
)

// The documents the testdata's outputs were made from: each was stored in
// kube-system/kubeadm-config of a local control plane of v1.36.3
// (hack/localcluster run --nodes 1 --kubernetes-version v1.36.3), and
// kubeadm 1.37.2 ran `upgrade apply phase upload-config kubeadm --dry-run`
// with apply.printConfig and apply.kubernetesVersion v1.37.2; its standard
// output is testdata/dry-run-*.txt.
const (
	// What kubeadm 1.36.3's init uploaded: kubeadm's own layout.
	localclusterDoc = `apiServer:
  extraArgs:
  - name: audit-log-maxage
    value: "30"
apiVersion: kubeadm.k8s.io/v1beta4
caCertificateValidityPeriod: 87600h0m0s
certificateValidityPeriod: 8760h0m0s
certificatesDir: /etc/kubernetes/pki
clusterName: kubernetes
controlPlaneEndpoint: 192.0.2.10:8443
controllerManager:
  extraArgs:
  - name: node-cidr-mask-size
    value: "24"
dns: {}
encryptionAlgorithm: RSA-2048
etcd:
  local:
    dataDir: /var/lib/etcd
imageRepository: registry.k8s.io
kind: ClusterConfiguration
kubernetesVersion: v1.36.3
networking:
  dnsDomain: cluster.local
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/12
proxy: {}
scheduler: {}
`
	minimalDoc = `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.36.3
controlPlaneEndpoint: 192.0.2.10:8443
networking:
  podSubnet: 10.244.0.0/16
`
	handwrittenDoc = `# written by hand
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.36.3

controlPlaneEndpoint: 192.0.2.10:8443
certificateValidityPeriod: 8760h
apiServer:
  certSANs: [a.example.com, b.example.com]
  extraArgs:
  - {name: audit-log-maxage, value: "30"}
networking: {podSubnet: 10.244.0.0/16, serviceSubnet: 10.96.0.0/12}
etcd:
  local:
    dataDir: /var/lib/etcd
`
	unknownDoc = `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.36.3
controlPlaneEndpoint: 192.0.2.10:8443
unknownField: x
apiServer:
  timeoutForControlPlane: 4m
networking:
  podSubnet: 10.244.0.0/16
`
	blankDoc = `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.36.3
controlPlaneEndpoint: 192.0.2.10:8443
clusterName: "with  two spaces and a trailing space "
apiServer:
  extraArgs:
  - name: audit-policy-file
    value: |
      line one

      line three
networking:
  podSubnet: 10.244.0.0/16
`
	// kubeadm's defaults for what minimalDoc leaves out, as 1.37.2 fills
	// them in.
	minimalWritten = `apiServer: {}
apiVersion: kubeadm.k8s.io/v1beta4
caCertificateValidityPeriod: 87600h0m0s
certificateValidityPeriod: 8760h0m0s
certificatesDir: /etc/kubernetes/pki
clusterName: kubernetes
controlPlaneEndpoint: 192.0.2.10:8443
controllerManager: {}
dns: {}
encryptionAlgorithm: RSA-2048
etcd:
  local:
    dataDir: /var/lib/etcd
imageRepository: registry.k8s.io
kind: ClusterConfiguration
kubernetesVersion: v1.37.2
networking:
  dnsDomain: cluster.local
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/12
proxy: {}
scheduler: {}
`
)

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// kubeadm's dry run says what it read and what it would write, byte for
// byte, and the plugin's layout is kubeadm's: the document kubeadm would
// write, parsed and marshalled again, is the same bytes, so that the engine
// writes what kubeadm would have.
func TestParseKubeadmsDryRun(t *testing.T) {
	for _, tc := range []struct {
		file, read, rv, written string
	}{
		{"dry-run-upgraded-from-1.36.3.txt", localclusterDoc, "217",
			// What the real phase wrote over it, read back from the cluster.
			strings.Replace(localclusterDoc, "kubernetesVersion: v1.36.3", "kubernetesVersion: v1.37.2", 1)},
		{"dry-run-minimal-defaults-added.txt", minimalDoc, "271", minimalWritten},
		{"dry-run-handwritten-normalized.txt", handwrittenDoc, "268", `apiServer:
  certSANs:
  - a.example.com
  - b.example.com
  extraArgs:
  - name: audit-log-maxage
    value: "30"
` + strings.TrimPrefix(minimalWritten, "apiServer: {}\n")},
		{"dry-run-unknown-fields-dropped.txt", unknownDoc, "274", minimalWritten},
		{"dry-run-blank-lines-kept.txt", blankDoc, "265", `apiServer:
  extraArgs:
  - name: audit-policy-file
    value: |
      line one

      line three
` + strings.Replace(strings.TrimPrefix(minimalWritten, "apiServer: {}\n"),
			"clusterName: kubernetes", "clusterName: 'with  two spaces and a trailing space '", 1)},
	} {
		t.Run(tc.file, func(t *testing.T) {
			up, err := parseDryRun(readTestdata(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.read, string(up.Read)); diff != "" {
				t.Errorf("read (-want +got):\n%s", diff)
			}
			if up.ResourceVersion != tc.rv {
				t.Errorf("resourceVersion %q, want %q", up.ResourceVersion, tc.rv)
			}
			if diff := cmp.Diff(tc.written, string(up.Written)); diff != "" {
				t.Errorf("written (-want +got):\n%s", diff)
			}
			doc, err := clusterconfig.Parse(up.Written)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(up.Written), string(doc.MustMarshal())); diff != "" {
				t.Errorf("kubeadm's layout and the plugin's differ (-kubeadm +plugin):\n%s", diff)
			}
		})
	}
}

// What kubeadm prints that does not say what it would write is refused,
// with the reason.
func TestParseKubeadmsDryRunRefuses(t *testing.T) {
	real := readTestdata(t, "dry-run-upgraded-from-1.36.3.txt")
	getBlock := real[strings.Index(real, getConfigMapLine) : strings.Index(real, "\n"+getConfigMapLine+"\n"+`[dryrun] Resource name "kube-proxy"`)+1]
	configBlock := real[strings.Index(real, configUsedLine):strings.Index(real, wouldUploadLine)]
	longValue := strings.Repeat("x", maxPrintedLine)
	for _, tc := range []struct {
		name, out, want string
	}{{
		name: "the phase wrote for real",
		out:  real + storingPrefix + ` "kubeadm-config" in the "kube-system" Namespace` + "\n",
		want: "kubeadm did not run dry: it wrote kubeadm-config itself",
	}, {
		name: "no read of kubeadm-config",
		out:  strings.Replace(real, getBlock, "", 1),
		want: "kubeadm printed no copy of the kubeadm-config it read (is it a kubeadm of 1.31 or later, whose dry run reads the cluster?)",
	}, {
		name: "a read without its object",
		out:  strings.Replace(real, kubeadmConfigLine+"\n"+attachedLine, kubeadmConfigLine+"\n[dryrun] Real object does not exist.", 1),
		want: `kubeadm read kubeadm-config but printed no copy of it ("[dryrun] Real object does not exist." after its GET)`,
	}, {
		name: "no configuration printed",
		out:  strings.Replace(real, configBlock, "", 1),
		want: `kubeadm printed no "[upgrade/config] Configuration used:" block (does it honour apply.printConfig?)`,
	}, {
		name: "the configuration printed twice",
		out:  strings.Replace(real, configBlock, configBlock+configBlock, 1),
		want: "kubeadm printed its configuration 2 times",
	}, {
		name: "the phase did not run",
		out:  strings.Replace(real, wouldUploadLine, "", 1),
		want: `kubeadm did not say "[dryrun] Would upload the kubeadm ClusterConfiguration to a ConfigMap": the phase did not run`,
	}, {
		name: "two different reads",
		out:  strings.Replace(real, getBlock, getBlock+strings.Replace(getBlock, `resourceVersion: "217"`, `resourceVersion: "218"`, 1), 1),
		want: "kubeadm read kubeadm-config twice, resourceVersion 217 and 218, and did not say which copy it would write from",
	}, {
		name: "a line kubeadm's print would cut",
		out:  strings.Replace(real, "    clusterName: kubernetes\n", "    clusterName: "+longValue+"\n", 1),
		want: "the ClusterConfiguration has a line of 65548 bytes, and kubeadm prints its configuration only up to a line of 65535",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDryRun(tc.out)
			var oe *OutputError
			if !errors.As(err, &oe) {
				t.Fatalf("want an *OutputError, got %v", err)
			}
			if oe.Reason != tc.want {
				t.Fatalf("reason:\n got %s\nwant %s", oe.Reason, tc.want)
			}
		})
	}
	// The same read twice is one read.
	twice := strings.Replace(real, getBlock, getBlock+getBlock, 1)
	if _, err := parseDryRun(twice); err != nil {
		t.Fatalf("the same copy read twice: %v", err)
	}
}
