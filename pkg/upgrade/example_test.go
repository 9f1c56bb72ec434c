package upgrade_test

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// Reading the upgrade state another node recorded: FromConfigMap decodes the
// annotations of the kubeadmcfg-upgrade ConfigMap (read it with any client,
// or engine.Engine.Get), the plan with them.
func ExampleFromConfigMap() {
	cm := &corev1.ConfigMap{}
	clock := upgrade.Clock{Now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), By: "controller-0"}
	// What upgrade-start and upgrade-set store, done here in memory.
	_, _ = upgrade.Apply(cm, func(rec *upgrade.Record) (*upgrade.Record, bool, error) {
		next, err := upgrade.Start(rec, nil, clock, "v1.37.2", "v1.37.3", "")
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
	fmt.Println(rec.FromVersion, "->", rec.ToVersion, "in", rec.State, "following plan", rec.PlanOf().Name)
	fmt.Println("may go to:", rec.PlanOf().Allowed(rec.State))
	// Output:
	// v1.37.2 -> v1.37.3 in downloading-images following plan starlingx
	// may go to: [downloading-images-failed downloaded-images upgrade-aborting]
}

// A custom plan: a file in the format `upgrade-plan show -o yaml` prints,
// instantiated for the cluster's control-plane nodes and checked, as
// upgrade-start --plan FILE does.
func ExampleParsePlan() {
	tmpl, err := upgrade.ParsePlan([]byte(`
name: rolling
steps:
- name: upgrading-{node}
  reaches: upgraded-{node}
  forEach: control-plane-node
- name: upgrading-workers
  reaches: upgraded-workers
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	plan, err := tmpl.Instantiate([]string{"cp-1", "cp-2"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(plan.Diagram())
	// Output:
	// upgrade-started
	//   -> upgrading-cp-1     -> upgraded-cp-1     (or upgrading-cp-1-failed)
	//   -> upgrading-cp-2     -> upgraded-cp-2     (or upgrading-cp-2-failed)
	//   -> upgrading-workers  -> upgraded-workers  (or upgrading-workers-failed)
	//   -> upgrade-complete
}
