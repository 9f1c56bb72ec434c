package controlplane

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// MinWait is the least time a caller should give each component to come up
// healthy (Options.Wait). The kubelet gives a stopping container its
// termination grace period, 30 seconds in kubeadm's manifests (they set
// none), and a kube-apiserver draining its watches can take all of it
// before the new one even starts: under that, a healthy change may be
// rolled back. Apply itself only refuses a wait too short to ever confirm a
// component (Settle + 2 × Interval).
const MinWait = 30 * time.Second

// apiTimeout bounds one read of a mirror Pod, so a hung connection to an API
// server that is restarting does not eat the whole wait.
const apiTimeout = 5 * time.Second

// mirrorPod reads the mirror Pod of m's static Pod (nil when there is none).
func (a *applier) mirrorPod(ctx context.Context, m *Manifest) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	return a.opts.Pods.Pod(ctx, m.Namespace(), m.MirrorPodName(a.opts.Node))
}

// currentHash reads the config hash of the manifest the kubelet runs for m's
// static Pod, retrying for up to Wait while the API cannot be read. Without
// it there is no telling the new manifest's Pod from the old one, so a
// missing mirror Pod is an error.
func (a *applier) currentHash(ctx context.Context, m *Manifest) (string, error) {
	deadline := time.Now().Add(a.opts.Wait)
	name := m.Namespace() + "/" + m.MirrorPodName(a.opts.Node)
	for {
		pod, err := a.mirrorPod(ctx, m)
		switch {
		case err != nil && exitcode.FromError(err) == exitcode.Forbidden:
			return "", err
		case err == nil && pod == nil:
			return "", exitcode.New(exitcode.NotFound, &NoMirrorPodError{Pod: name})
		case err == nil && pod.Annotations[ConfigHashAnnotation] == "":
			return "", exitcode.Failuref("mirror Pod %s has no %s annotation", name, ConfigHashAnnotation)
		case err == nil:
			return pod.Annotations[ConfigHashAnnotation], nil
		}
		if time.Now().After(deadline) {
			return "", exitcode.Failuref("cannot read mirror Pod %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(a.opts.Interval):
		}
	}
}

// wait waits until the kubelet runs manifest m (its mirror Pod's config
// hash satisfies runs), reports it Ready, and m's own probe has answered
// for Settle; for at most Wait. With fastFail, a kubelet report that the
// container keeps exiting ends the wait at once. It returns the hash seen
// and how long it took. While the API server restarts the mirror Pod cannot
// be read: that is waited through.
func (a *applier) wait(ctx context.Context, c Component, m *Manifest, what string, runs func(hash string) bool, fastFail bool) (string, time.Duration, error) {
	probe, err := m.Probe()
	if err != nil {
		return "", 0, err
	}
	start := time.Now()
	deadline := start.Add(a.opts.Wait)
	name := m.Namespace() + "/" + m.MirrorPodName(a.opts.Node)
	a.emit(Event{Component: c, Kind: EventWaiting, Limit: a.opts.Wait,
		Message: fmt.Sprintf("the kubelet to run %s and report mirror Pod %s Ready, and %s to answer", what, name, probe.URL())})
	var healthySince time.Time
	seen := ""
	for {
		status := ""
		pod, err := a.mirrorPod(ctx, m)
		hash := ""
		if pod != nil {
			hash = pod.Annotations[ConfigHashAnnotation]
		}
		switch {
		case err != nil && exitcode.FromError(err) == exitcode.Forbidden:
			return seen, time.Since(start), err
		case err != nil:
			status = "cannot read the mirror Pod (the API server may be restarting): " + shortError(err)
		case pod == nil:
			status = "no mirror Pod"
		case !runs(hash):
			status = fmt.Sprintf("the kubelet runs another manifest (config hash %s)", hash)
		}
		if status == "" {
			seen = hash
			if fastFail {
				if err := crashLoop(c, pod); err != nil {
					return seen, time.Since(start), err
				}
			}
			pctx, cancel := context.WithTimeout(ctx, apiTimeout)
			perr := probe.Check(pctx, a.client)
			cancel()
			switch {
			case perr != nil:
				status = fmt.Sprintf("%s: %v", probe.URL(), perr)
			case !podReady(pod):
				status = fmt.Sprintf("%s answers; the kubelet does not report it Ready yet", probe.URL())
			default:
				if healthySince.IsZero() {
					healthySince = time.Now()
				}
				status = fmt.Sprintf("Ready, and %s answers", probe.URL())
				if time.Since(healthySince) >= a.opts.Settle {
					return seen, time.Since(start), nil
				}
			}
		}
		if !strings.HasPrefix(status, "Ready") {
			healthySince = time.Time{}
		}
		a.emit(Event{Component: c, Kind: EventStatus, Message: status, Elapsed: time.Since(start), Limit: a.opts.Wait})
		if !time.Now().Add(a.opts.Interval).Before(deadline) {
			return seen, time.Since(start), &UnhealthyError{Component: c, Wait: a.opts.Wait, Last: status}
		}
		select {
		case <-ctx.Done():
			return seen, time.Since(start), fmt.Errorf("interrupted while waiting for %s: %w", c.PodName(), ctx.Err())
		case <-time.After(a.opts.Interval):
		}
	}
}

// shortError is an API error without client-go's account of earlier
// attempts.
func shortError(err error) string {
	msg, _, _ := strings.Cut(exitcode.Message(err), " - error from a previous attempt")
	return msg
}

// podReady reports the kubelet's verdict on the Pod: its Ready condition.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// crashLoop reports a container the kubelet keeps restarting: it exited at
// least once, or waits in CrashLoopBackOff.
func crashLoop(c Component, pod *corev1.Pod) error {
	for _, s := range pod.Status.ContainerStatuses {
		waiting := s.State.Waiting != nil && s.State.Waiting.Reason == "CrashLoopBackOff"
		if s.RestartCount == 0 && !waiting {
			continue
		}
		return &CrashLoopError{Component: c, Restarts: s.RestartCount, ExitCode: exitCode(s)}
	}
	return nil
}

func exitCode(s corev1.ContainerStatus) int32 {
	switch {
	case s.State.Terminated != nil:
		return s.State.Terminated.ExitCode
	case s.LastTerminationState.Terminated != nil:
		return s.LastTerminationState.Terminated.ExitCode
	}
	return 0
}

// Check looks once at every component of plan as it runs now: the kubelet
// reports its mirror Pod Ready and its probe answers. It is how a
// reconfiguration that had nothing to change knows the node is healthy on
// what it already runs.
func Check(ctx context.Context, plan *Plan, opts Options) error {
	a := newApplier(opts)
	for _, ch := range plan.Changes {
		pod, err := a.mirrorPod(ctx, ch.Current)
		if err != nil {
			return fmt.Errorf("%s: cannot read its mirror Pod: %w", ch.Component.PodName(), err)
		}
		if pod == nil || !podReady(pod) {
			return fmt.Errorf("%s: mirror Pod %s/%s is not Ready", ch.Component.PodName(), ch.Current.Namespace(), ch.Current.MirrorPodName(opts.Node))
		}
		probe, err := ch.Current.Probe()
		if err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, apiTimeout)
		err = probe.Check(pctx, a.client)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %s: %w", ch.Component.PodName(), probe.URL(), err)
		}
	}
	return nil
}
