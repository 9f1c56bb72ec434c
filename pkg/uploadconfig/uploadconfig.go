// Package uploadconfig makes the change `kubeadm upgrade apply` makes to
// kube-system/kubeadm-config without kubeadm writing it.
//
// kubeadm's upload-config kubeadm phase writes back the whole
// ClusterConfiguration that `kubeadm upgrade apply` read when it started,
// with the new kubernetesVersion: a change made by anyone else meanwhile is
// lost (a whole `upgrade apply` reads the document before its preflight
// and writes it after its control-plane phase, seconds to minutes later;
// the phase run alone, as its own process, reads it when it starts and
// writes it tens of milliseconds later, so the window is smaller but the
// same). The node agent runs kubeadm phase by phase, skips upload-config
// kubeadm, and calls UpgradeDocument at that point instead:
//
//   - kubeadm itself says what it would write (Kubeadm.Upload): the phase
//     runs as a dry run with apply.printConfig, and prints both the
//     kubeadm-config it read and the ClusterConfiguration it would write, as
//     the real phase would write it, byte for byte;
//   - the difference between the two is kubeadm's change, carried as a
//     three-way merge (Upload.Edit) through the engine's compare-and-swap,
//     validated as every write, and applied again to the newer document on
//     every conflict, so that what another writer changed since kubeadm read
//     the document is kept;
//   - when another writer changed a field kubeadm changes too (the
//     kubernetesVersion, or a value kubeadm rewrites in its own form),
//     kubeadm is asked again: its dry run reads the newer document, and its
//     rule applied to that document is what is written. After MaxKubeadmRuns
//     such rounds the conflict is returned and nothing is written.
//
// With nobody else writing, the engine writes exactly the bytes kubeadm's
// phase would have written.
//
// The phase also makes sure of the Role and RoleBinding
// kubeadm:nodes-kubeadm-config, which let nodes read kubeadm-config: kubeadm
// init made them, and kubeadm 1.37 writes them exactly as 1.36 does
// (phases/uploadconfig is unchanged between the two), so skipping the phase
// leaves them as they should be. A kubeadm that changed them would need
// them written too.
package uploadconfig

import (
	"context"
	"errors"
	"fmt"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Target is the document kubeadm's phase writes, and so the one the engine
// given to UpgradeDocument must write.
var Target = engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: clusterConfigurationKey}

// MaxKubeadmRuns bounds how often UpgradeDocument asks kubeadm, when
// another writer keeps changing the fields kubeadm changes.
const MaxKubeadmRuns = 3

// Uploader says what kubeadm's upload-config kubeadm phase would write if
// it ran now. Kubeadm asks the real kubeadm.
type Uploader interface {
	Upload(ctx context.Context) (*Upload, error)
}

// UploaderFunc adapts a function to an Uploader, for programs that know
// kubeadm's answer another way, and for tests.
type UploaderFunc func(ctx context.Context) (*Upload, error)

// Upload calls f.
func (f UploaderFunc) Upload(ctx context.Context) (*Upload, error) { return f(ctx) }

// Result is the write UpgradeDocument made.
type Result struct {
	// DocumentResult is the engine's: Before is the document the write
	// replaced, After the one written (equal to Before when unchanged).
	engine.DocumentResult
	// Upload is kubeadm's answer the write was made from: what kubeadm read
	// and what it would have written.
	Upload *Upload
	// KubeadmRuns counts the times kubeadm was asked.
	KubeadmRuns int
}

// UpgradeDocument writes kubeadm's upload-config kubeadm change to
// kubeadm-config through eng, whose target must be Target: kubeadm says
// what it would write, and its change is merged into the document as it is
// at the write (see the package documentation). A document that already
// says what kubeadm would write is not written again, so a re-run after a
// failure is harmless.
//
// Errors: a *KubeadmError or *OutputError when kubeadm could not say (the
// Result is then nil); a *clusterconfig.MergeConflictError (exit 4) when
// another writer changed the same fields as kubeadm in each of
// MaxKubeadmRuns rounds; the engine's errors otherwise (validation, API),
// with the engine's result. Nothing is written on any error.
func UpgradeDocument(ctx context.Context, eng *engine.Engine, kubeadm Uploader) (*Result, error) {
	if eng.Target() != Target {
		return nil, exitcode.Usagef("kubeadm's upload-config writes %s key %s, not %s key %s", Target, Target.Key, eng.Target(), eng.Target().Key)
	}
	for run := 1; ; run++ {
		up, err := kubeadm.Upload(ctx)
		if err != nil {
			return nil, err
		}
		edit, err := up.Edit()
		if err != nil {
			return nil, err
		}
		res, err := eng.UpdateDocument(ctx, edit)
		out := &Result{Upload: up, KubeadmRuns: run}
		if res != nil {
			out.DocumentResult = *res
		}
		var conflict *clusterconfig.MergeConflictError
		if errors.As(err, &conflict) {
			if run < MaxKubeadmRuns && ctx.Err() == nil {
				continue
			}
			return out, fmt.Errorf("another writer changed fields of kubeadm-config that the upgrade changes, after each of %d runs of kubeadm: %w", run, err)
		}
		return out, err
	}
}
