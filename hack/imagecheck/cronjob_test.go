package imagecheck

import (
	"os"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"
)

// TestAuditCronJobRunsThePluginsImage: the upgrade-audit CronJob runs in
// the image make dist writes, named as the DaemonSet names it, through the
// image's entrypoint (the plugin) as a non-root user.
func TestAuditCronJobRunsThePluginsImage(t *testing.T) {
	const file = "../../deploy/upgrade-audit-cronjob.yaml"
	repo, _ := daemonSetImage(t, "../../deploy/agent-daemonset.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
		var cj batchv1.CronJob
		if err := yaml.Unmarshal([]byte(doc), &cj); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if cj.Kind != "CronJob" {
			continue
		}
		c := cj.Spec.JobTemplate.Spec.Template.Spec.Containers
		if len(c) != 1 {
			t.Fatalf("%s: %d containers, want the audit alone", file, len(c))
		}
		sc := c[0].SecurityContext
		switch {
		case c[0].Image != repo+":VERSION":
			t.Errorf("%s runs %q, want the DaemonSet's image %s:VERSION", file, c[0].Image, repo)
		case len(c[0].Command) != 0 || len(c[0].Args) == 0 || c[0].Args[0] != "upgrade-audit":
			t.Errorf("%s: command %q args %q, want the image's entrypoint with upgrade-audit", file, c[0].Command, c[0].Args)
		case sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
			t.Errorf("%s: the audit must run as non-root", file)
		}
		return
	}
	t.Fatalf("%s holds no CronJob", file)
}
