package main

import (
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// run builds etcd as kubeadm does unless told otherwise; anything but the
// two modes is refused with the flag named.
func TestParseRunEtcd(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want testcluster.EtcdMode
		err  string
	}{
		{"default", nil, testcluster.EtcdStacked, ""},
		{"stacked", []string{"--etcd", "stacked"}, testcluster.EtcdStacked, ""},
		{"external", []string{"--etcd=external"}, testcluster.EtcdExternal, ""},
		{"unknown", []string{"--etcd", "local"}, "", `--etcd must be stacked or external, not "local"`},
		{"empty", []string{"--etcd="}, "", `--etcd must be stacked or external, not ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseRun(append(tc.args, "--", "true"))
			switch {
			case tc.err != "":
				if err == nil || err.Error() != tc.err {
					t.Errorf("want error %q, got %v", tc.err, err)
				}
			case err != nil:
				t.Fatal(err)
			case o.etcd != tc.want:
				t.Errorf("etcd %q, want %q", o.etcd, tc.want)
			}
		})
	}
}
