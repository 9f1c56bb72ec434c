package upgrade_test

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// Reading the upgrade state another node recorded: FromConfigMap decodes the
// annotations of the kubeadmcfg-upgrade ConfigMap (read it with any client,
// or engine.Engine.Get).
func ExampleFromConfigMap() {
	cm := &corev1.ConfigMap{}
	clock := upgrade.Clock{Now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), By: "controller-0"}
	// What upgrade-start and upgrade-set store, done here in memory.
	_, _ = upgrade.Apply(cm, func(rec *upgrade.Record) (*upgrade.Record, bool, error) {
		next, err := upgrade.Start(rec, clock, "v1.37.2", "v1.37.3", "")
		return next, err == nil, err
	})
	_, _ = upgrade.Apply(cm, upgrade.Existing(func(rec *upgrade.Record) (bool, error) {
		return rec.Set(clock, upgrade.DownloadingImages, upgrade.Started, false, "")
	}))

	rec, ok, err := upgrade.FromConfigMap(cm)
	if err != nil || !ok {
		fmt.Println("no upgrade recorded")
		return
	}
	fmt.Println(rec.FromVersion, "->", rec.ToVersion, "in", rec.State)
	fmt.Println("may go to:", upgrade.Allowed(rec.State))
	// Output:
	// v1.37.2 -> v1.37.3 in downloading-images
	// may go to: [downloading-images-failed downloaded-images upgrade-aborting]
}
