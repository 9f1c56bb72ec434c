package main

import (
	"errors"
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

// --kubernetes-version names a release the harness built; anything else is
// refused with the flag and the releases named.
func TestCheckVersion(t *testing.T) {
	bins := testcluster.Binaries{Version: "v1.37.2", Previous: testcluster.Release{Version: "v1.36.3"}}
	for _, tc := range []struct {
		version, err string
	}{
		{"", ""},
		{"v1.37.2", ""},
		{"v1.36.3", ""},
		{"v1.35.0", `--kubernetes-version must be v1.37.2 or v1.36.3, not "v1.35.0"`},
		{"1.36.3", `--kubernetes-version must be v1.37.2 or v1.36.3, not "1.36.3"`},
	} {
		err := checkVersion(tc.version, bins)
		var usage *usageError
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.version, err)
		case tc.err != "" && (err == nil || err.Error() != tc.err || !errors.As(err, &usage)):
			t.Errorf("%q: want the usage error %q, got %v", tc.version, tc.err, err)
		}
	}
}
