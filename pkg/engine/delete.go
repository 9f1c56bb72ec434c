package engine

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Delete removes the ConfigMap once check accepts the freshly read copy,
// with the resourceVersion and uid it read as preconditions: a concurrent
// change makes the delete conflict, and check runs again on the newer copy.
// A delete whose answer is lost is recognised as done when the first change
// after the copy it checked is the deletion.
func (e *Engine) Delete(ctx context.Context, check func(cm *corev1.ConfigMap) error) (*Result, error) {
	c := &call{e: e, res: &Result{DryRun: e.opts.DryRun}}
	ctx, cancel := context.WithTimeout(c.trace(ctx), e.opts.Timeout)
	defer cancel()
	err := c.retry(ctx, func(ctx context.Context) (bool, error) {
		cms := e.client.CoreV1().ConfigMaps(e.target.Namespace)
		current, err := cms.Get(ctx, e.target.Name, metav1.GetOptions{})
		err = c.answered(err)
		if c.pending != nil {
			done, rerr := c.resolveDelete(ctx, current, err)
			if rerr != nil {
				return !IsRetryable(rerr) && ctx.Err() == nil, rerr
			}
			if done {
				c.res.Changed = true // the lost delete landed
				return true, nil
			}
		}
		if err != nil {
			return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "get", e.target.String())
		}
		c.res.Old = current
		if err := check(current); err != nil {
			return true, err
		}
		c.res.Changed = true
		if e.opts.DryRun == DryRunClient {
			return true, nil
		}
		err = c.answered(cms.Delete(ctx, e.target.Name, metav1.DeleteOptions{
			DryRun:        e.serverDryRun(),
			Preconditions: &metav1.Preconditions{UID: &current.UID, ResourceVersion: &current.ResourceVersion},
		}))
		if err != nil {
			if e.lost(err) {
				c.pending = &pending{kind: pendingDelete, uid: current.UID, precondition: current.ResourceVersion, cause: err}
			}
			return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "delete", e.target.String())
		}
		return true, nil
	})
	return c.res, err
}

func (e *Engine) serverDryRun() []string {
	if e.opts.DryRun == DryRunServer {
		return []string{metav1.DryRunAll}
	}
	return nil
}
