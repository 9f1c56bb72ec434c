package imagecheck

import (
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/unitfile"
)

// metricsHostProblem says what keeps a Prometheus outside the node from
// scraping an agent that serves its metrics on addr ("" when nothing
// does): no address given (the agent's default is loopback), loopback,
// or none at all.
func metricsHostProblem(addr string, given bool) string {
	if !given {
		return "no --metrics-bind-address: the agent's default, 127.0.0.1:10268, is loopback"
	}
	if addr == "0" {
		return "--metrics-bind-address=0 serves no metrics"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "--metrics-bind-address=" + addr + ": " + err.Error()
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return "--metrics-bind-address=" + addr + " is loopback, out of a Prometheus's reach"
	}
	return ""
}

// Review A5: every shipped way of running the agent serves its metrics
// where a Prometheus outside the node can scrape them, which the shipped
// rules (deploy/prometheus-rules.yaml) need: the unit and its drop-in for
// upgrades on the node's addresses, the DaemonSet (and its patches) on
// the node's address from status.hostIP.
func TestAgentsServeMetricsOffLoopback(t *testing.T) {
	units := map[string]*unitfile.Unit{}
	base, err := unitfile.Read(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	units[unitFile] = base
	units[dropInFile] = readDropIn(t, dropInFile)
	for file, u := range units {
		start, _ := u.Value("Service", "ExecStart")
		_, argv := unitfile.Command(start)
		addr, given := unitfile.Flag(argv, "metrics-bind-address")
		if p := metricsHostProblem(addr, given); p != "" {
			t.Errorf("%s: %s", file, p)
		}
	}
	for name, ds := range map[string][]string{
		daemonSetFile:                           nil,
		upgradesPatch:                           {upgradesPatch},
		externalEtcdPatch:                       {externalEtcdPatch},
		upgradesPatch + " " + externalEtcdPatch: {upgradesPatch, externalEtcdPatch},
	} {
		d := readDaemonSet(t, daemonSetFile)
		if ds != nil {
			d = readPatchedDaemonSet(t, ds...)
		}
		c := agentContainer(t, d)
		addr, given := unitfile.Flag(c.Command, "metrics-bind-address")
		if addr != "$(HOST_IP):10268" {
			t.Errorf("%s: --metrics-bind-address=%s (given %v), want $(HOST_IP):10268", name, addr, given)
		}
		var hostIP *corev1.EnvVar
		for i := range c.Env {
			if c.Env[i].Name == "HOST_IP" {
				hostIP = &c.Env[i]
			}
		}
		if hostIP == nil || hostIP.ValueFrom == nil || hostIP.ValueFrom.FieldRef == nil || hostIP.ValueFrom.FieldRef.FieldPath != "status.hostIP" {
			t.Errorf("%s: HOST_IP is %+v, want the Pod's status.hostIP", name, hostIP)
		}
		if !d.Spec.Template.Spec.HostNetwork {
			t.Errorf("%s: without the host's network the node's address is not the Pod's to bind", name)
		}
	}
	// What the check refuses: the recipes as they were.
	for addr, given := range map[string]bool{"": false, "127.0.0.1:10268": true, "[::1]:10268": true, "localhost:10268": true} {
		if metricsHostProblem(addr, given) == "" {
			t.Errorf("--metrics-bind-address %q (given %v) passes", addr, given)
		}
	}
}
