package backup

import (
	"os"
	"strconv"
)

// DiskReserveEnv is the variable that, set to a whole percentage from 0
// to 100, replaces the tenth of the filesystem an etcd snapshot keeps free. It is for
// tests, whose outcome must not depend on how full the disk of the machine
// running them is: hack/test.sh sets it to 0, and the test of the refusal
// to 100.
const DiskReserveEnv = "KUBEADMCFG_TEST_DISK_RESERVE_PERCENT"

// reservePercent is the part of the filesystem, in percent, that a
// snapshot leaves free: 10, as the kubelet's default hard eviction
// threshold, unless DiskReserveEnv says otherwise.
func reservePercent() uint64 {
	if p, err := strconv.ParseUint(os.Getenv(DiskReserveEnv), 10, 8); err == nil && p <= 100 {
		return p
	}
	return 10
}
