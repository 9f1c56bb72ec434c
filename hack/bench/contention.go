package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
)

// form is one way of writing: a name, and a function that appends arg to
// the apiServer's certSANs. It returns the conflicts it met.
type form struct {
	name  string
	patch func(ctx context.Context, ns, arg string) (conflicts int, err error)
}

type outcome struct {
	form            string
	writers, each   int
	kept, lost      int
	twice           int // present more than once: applied twice
	failed          int
	elapsed         time.Duration
	latencies       []time.Duration
	conflicts       int64
	goodput, single float64
}

// contention runs W writers x K patches in every form against a fresh copy
// of the kubeadm-seeded document, and prints the table.
func contention(ctx context.Context, env *benchEnv, writersList, formList string, k int) error {
	var writers []int
	for _, w := range strings.Split(writersList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 {
			return fmt.Errorf("bad writer count %q", w)
		}
		writers = append(writers, n)
	}
	cs, err := env.cluster.Clientset()
	if err != nil {
		return err
	}
	seed, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		return err
	}
	forms := []form{
		{"plugin processes", env.pluginProcess},
		{"plugin engine, in-process", engineForm(cs)},
		{"read + merge patch, no resourceVersion", naiveForm(cs)},
		{"client-go retry.DefaultRetry", defaultRetryForm(cs)},
	}
	if formList != "" {
		var chosen []form
		for _, n := range strings.Split(formList, ",") {
			i, err := strconv.Atoi(strings.TrimSpace(n))
			if err != nil || i < 1 || i > len(forms) {
				return fmt.Errorf("bad form number %q", n)
			}
			chosen = append(chosen, forms[i-1])
		}
		forms = chosen
	}
	var results []outcome
	run := 0
	for _, f := range forms {
		var single float64
		for _, w := range writers {
			run++
			ns := fmt.Sprintf("bench-%d", run)
			if _, err := env.cluster.PutConfigMap(ctx, ns, "kubeadm-config", seed.Data); err != nil {
				return err
			}
			o := runForm(ctx, f, ns, w, k)
			if err := o.check(ctx, cs, ns); err != nil {
				return err
			}
			if w == writers[0] {
				single = o.goodput
			}
			o.single = single
			results = append(results, o)
			fmt.Fprintf(os.Stderr, "  %-40s W=%-3d kept %d/%d, %.1f/s\n", f.name, w, o.kept, w*k, o.goodput)
		}
	}
	fmt.Printf("\nW writers x %d patches each, every patch appending one unique certificate SAN (a patch applied twice would show twice); real kube-apiserver v1.37.2 + etcd (fsync on)\n\n", k)
	fmt.Println("| form | W | kept | lost | twice | failed | goodput | vs W=1 | p50 | p99 | conflicts |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, o := range results {
		p50, p99 := percentile(o.latencies, 50), percentile(o.latencies, 99)
		fmt.Printf("| %s | %d | %d | %d | %d | %d | %.1f/s | %.2fx | %s | %s | %d |\n", o.form, o.writers, o.kept, o.lost, o.twice, o.failed,
			o.goodput, o.goodput/o.single, p50.Round(time.Millisecond), p99.Round(time.Millisecond), o.conflicts)
	}
	return nil
}

func runForm(ctx context.Context, f form, ns string, writers, each int) outcome {
	o := outcome{form: f.name, writers: writers, each: each}
	var mu sync.Mutex
	var conflicts atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range each {
				t0 := time.Now()
				c, err := f.patch(ctx, ns, fmt.Sprintf("bench-w%d-p%d", w, p))
				took := time.Since(t0)
				conflicts.Add(int64(c))
				mu.Lock()
				if err != nil {
					o.failed++
				} else {
					o.latencies = append(o.latencies, took)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	o.elapsed = time.Since(start)
	o.conflicts = conflicts.Load()
	return o
}

// check counts the SANs present in the final document: once is kept, more
// is applied twice.
func (o *outcome) check(ctx context.Context, cs kubernetes.Interface, ns string) error {
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		return err
	}
	doc := cm.Data["ClusterConfiguration"]
	for w := range o.writers {
		for p := range o.each {
			switch strings.Count(doc, fmt.Sprintf("- bench-w%d-p%d\n", w, p)) {
			case 0:
			case 1:
				o.kept++
			default:
				o.twice++
			}
		}
	}
	o.lost = o.writers*o.each - o.failed - o.kept - o.twice
	o.goodput = float64(o.kept) / o.elapsed.Seconds()
	return nil
}

func percentile(xs []time.Duration, p int) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

// pluginProcess runs the built plugin as a separate process, as scripts do.
func (env *benchEnv) pluginProcess(ctx context.Context, ns, arg string) (int, error) {
	cmd := exec.CommandContext(ctx, env.plugin, "patch", "--no-backup", "-n", ns, "-o", "jsonpath={.conflicts}",
		"--set", sanEdit+"="+arg)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.cluster.Kubeconfig)
	out, err := cmd.Output()
	if err != nil {
		return 0, err
	}
	c, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return c, nil
}

// engineForm drives the plugin's engine in-process, queue included.
func engineForm(cs kubernetes.Interface) func(context.Context, string, string) (int, error) {
	return func(ctx context.Context, ns, arg string) (int, error) {
		t := engine.Target{Namespace: ns, Name: "kubeadm-config", Key: engine.DefaultKey}
		edit, err := clusterconfig.NewSet(sanEdit, arg)
		if err != nil {
			return 0, err
		}
		e := engine.New(cs, t, engine.Options{Queue: &engine.QueueOptions{Identity: "bench-" + arg}})
		res, err := e.UpdateDocument(ctx, edit)
		return res.Conflicts, err
	}
}

// sanEdit is the edit every form makes: an append, which a second
// application would reveal.
const sanEdit = "apiServer.certSANs[+]"

// addArg is the edit every baseline makes to the document text.
func addArg(doc, arg string) (string, error) {
	d, err := clusterconfig.Parse([]byte(doc))
	if err != nil {
		return "", err
	}
	if err := d.Set(sanEdit, arg); err != nil {
		return "", err
	}
	out, err := d.Marshal()
	return string(out), err
}

// naiveForm reads, edits, and merge-patches the data back without a
// resourceVersion: what a script moved from kubectl to the API does. It never
// conflicts, and loses every update written between its read and its write.
func naiveForm(cs kubernetes.Interface) func(context.Context, string, string) (int, error) {
	return func(ctx context.Context, ns, arg string) (int, error) {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kubeadm-config", metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		doc, err := addArg(cm.Data["ClusterConfiguration"], arg)
		if err != nil {
			return 0, err
		}
		patch := fmt.Sprintf(`{"data":{"ClusterConfiguration":%s}}`, strconv.Quote(doc))
		_, err = cs.CoreV1().ConfigMaps(ns).Patch(ctx, "kubeadm-config", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return 0, err
	}
}

// defaultRetryForm is client-go's retry.RetryOnConflict with DefaultRetry.
func defaultRetryForm(cs kubernetes.Interface) func(context.Context, string, string) (int, error) {
	return func(ctx context.Context, ns, arg string) (int, error) {
		conflicts := 0
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kubeadm-config", metav1.GetOptions{})
			if err != nil {
				return err
			}
			doc, err := addArg(cm.Data["ClusterConfiguration"], arg)
			if err != nil {
				return err
			}
			next := cm.DeepCopy()
			next.Data = map[string]string{"ClusterConfiguration": doc}
			_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, next, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) {
				conflicts++
			}
			return err
		})
		return conflicts, err
	}
}
