package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// What TestEtcdReconfigure records while members change, from outside the
// plugin: etcd's own view of its members (etcdWatch), and a client that
// keeps writing to the API through the load balancer (apiWriter).

// etcdWatch asks every member its status (clientv3 Status) and one of them
// the member list, every 100ms, and keeps what it saw.
type etcdWatch struct {
	names []string
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	samples []etcdSample
}

// etcdSample is one look at the cluster.
type etcdSample struct {
	at time.Time
	// up: the member answered its status, without error; led: and it
	// had a leader (not during an election); slow: it gave no answer
	// within the look's second, neither an answer nor a refusal. A
	// stopped member's port refuses at once; a live one on a loaded
	// machine can take longer, and is not down for that.
	up, led, slow map[string]bool
	// listed is how many started voting members the member list had, as
	// the members that answered it said (-1 when none did).
	listed int
}

// watchEtcd starts watching the members of nodes; the watch ends with the
// test, or with stopAndGet.
func watchEtcd(t *testing.T, nodes []*testcluster.Node) *etcdWatch {
	t.Helper()
	w := &etcdWatch{stop: make(chan struct{}), done: make(chan struct{})}
	clients := map[string]*clientv3.Client{}
	for _, n := range nodes {
		cli := etcdClient(t, nodes[0].Etcd, n.Etcd.ClientURL)
		clients[n.Name] = cli
		w.names = append(w.names, n.Name)
	}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			w.look(clients)
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { w.stopAndGet() })
	return w
}

func (w *etcdWatch) look(clients map[string]*clientv3.Client) {
	s := etcdSample{at: time.Now(), up: map[string]bool{}, led: map[string]bool{}, slow: map[string]bool{}, listed: -1}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, cli := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := cli.Status(ctx, cli.Endpoints()[0])
			slow := err != nil && ctx.Err() != nil
			cancel()
			up := err == nil && len(st.Errors) == 0
			listed := -1
			if up {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				if list, err := cli.MemberList(ctx, clientv3.WithSerializable()); err == nil {
					listed = 0
					for _, m := range list.Members {
						if !m.IsLearner && len(m.ClientURLs) > 0 {
							listed++
						}
					}
				}
				cancel()
			}
			mu.Lock()
			defer mu.Unlock()
			s.up[name], s.led[name], s.slow[name] = up, up && st.Leader != 0, slow
			s.listed = max(s.listed, listed)
		}()
	}
	wg.Wait()
	w.mu.Lock()
	w.samples = append(w.samples, s)
	w.mu.Unlock()
}

// last is the latest look, if any.
func (w *etcdWatch) last() (etcdSample, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.samples) == 0 {
		return etcdSample{}, false
	}
	return w.samples[len(w.samples)-1], true
}

// stopAndGet ends the watch and returns what it saw.
func (w *etcdWatch) stopAndGet() []etcdSample {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.samples)
}

// etcdVerdict sums the samples up.
type etcdVerdict struct {
	samples int
	// minUp is the fewest members up at once, minListed the fewest
	// started voting members the member list had (looks where no member
	// answered it aside: unlisted counts them); leaderless counts the
	// looks where no member had a leader (an election); slow counts the
	// answers that did not come in time, each taken as the member's state
	// at the look before.
	minUp, minListed, unlisted, leaderless, slow int
	// down is, per member, every stretch it was not up, in order.
	down map[string][]time.Duration
}

func judge(names []string, samples []etcdSample) etcdVerdict {
	v := etcdVerdict{samples: len(samples), minUp: len(names), minListed: len(names), down: map[string][]time.Duration{}}
	since := map[string]time.Time{}
	for _, s := range samples {
		if s.listed < 0 {
			v.unlisted++
		} else {
			v.minListed = min(v.minListed, s.listed)
		}
		led := false
		for _, n := range names {
			led = led || s.led[n]
		}
		if !led {
			v.leaderless++
		}
		up := 0
		for _, n := range names {
			isUp := s.up[n]
			if s.slow[n] {
				v.slow++
				isUp = since[n].IsZero()
			}
			switch {
			case isUp:
				up++
				if !since[n].IsZero() {
					v.down[n] = append(v.down[n], s.at.Sub(since[n]))
					since[n] = time.Time{}
				}
			case since[n].IsZero():
				since[n] = s.at
			}
		}
		v.minUp = min(v.minUp, up)
	}
	for _, n := range names {
		if !since[n].IsZero() {
			v.down[n] = append(v.down[n], samples[len(samples)-1].at.Sub(since[n]))
		}
	}
	return v
}

func (v etcdVerdict) String() string {
	return fmt.Sprintf("%d looks: at least %d members up and %d listed at every look (%d looks without a member list, %d without a leader, %d answers too slow); down stretches %v",
		v.samples, v.minUp, v.minListed, v.unlisted, v.leaderless, v.slow, v.down)
}

// apiWriter patches kube-system/kubeadm-config (an annotation) every 200ms
// (a write starts on each tick while none is in flight) through the load
// balancer, each write on a new connection so that it may reach any node's
// API server, as a new client would, and retries a write until it lands:
// until the load balancer's checks mark down the API server beside a member
// that went down (about a second), it is sent its share of connections.
type apiWriter struct {
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	writes []apiWrite
}

// apiWrite is one write: when it was first tried, when it landed, and how
// many attempts failed first.
type apiWrite struct {
	start, landed time.Time
	failed        int
}

// attemptTimeout bounds one attempt of the writer: an API server whose
// member is down holds a write until its storage answers.
const attemptTimeout = 2 * time.Second

func startWriter(t *testing.T, kubeconfig string) *apiWriter {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = attemptTimeout
	w := &apiWriter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(200 * time.Millisecond) // a write that takes longer drops the ticks it spans
		defer tick.Stop()
		for seq := 0; ; seq++ {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			write := apiWrite{start: time.Now()}
			for {
				err := writeOnce(cfg, seq)
				if err == nil {
					break
				}
				write.failed++
				select {
				case <-w.stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
			write.landed = time.Now()
			w.mu.Lock()
			w.writes = append(w.writes, write)
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.stopAndGet() })
	return w
}

// writeOnce makes one attempt of write seq, on a connection of its own: a
// dialer of its own makes client-go build a transport for it (it caches
// none with a custom dialer).
func writeOnce(cfg *rest.Config, seq int) error {
	c := *cfg
	c.Dial = (&net.Dialer{Timeout: attemptTimeout}).DialContext
	httpClient, err := rest.HTTPClientFor(&c)
	if err != nil {
		return err
	}
	defer httpClient.CloseIdleConnections()
	client, err := kubernetes.NewForConfigAndClient(&c, httpClient)
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"e2e.kubeadmcfg.io/writer":%q}}}`, strconv.Itoa(seq))
	ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
	defer cancel()
	_, err = client.CoreV1().ConfigMaps("kube-system").Patch(ctx, "kubeadm-config", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// stopAndGet ends the writer and returns its writes.
func (w *apiWriter) stopAndGet() []apiWrite {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes)
}

// longestOutage is the longest time a write took to land once its first
// attempt failed, and how many attempts failed in all.
func longestOutage(writes []apiWrite) (longest time.Duration, failed int) {
	for _, w := range writes {
		failed += w.failed
		if w.failed > 0 {
			longest = max(longest, w.landed.Sub(w.start))
		}
	}
	return longest, failed
}

// A member that answers too slowly keeps the state it had: a live one on a
// loaded machine is not counted down beside a member that really is (the
// quorum check), and a stopped one is not counted back up.
func TestJudgeTakesASlowAnswerAsThePreviousState(t *testing.T) {
	names := []string{"a", "b", "c"}
	at := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	look := func(sec int, down, slow string) etcdSample {
		s := etcdSample{at: at.Add(time.Duration(sec) * time.Second), up: map[string]bool{}, led: map[string]bool{}, slow: map[string]bool{}, listed: 3}
		for _, n := range names {
			s.up[n] = n != down && n != slow
			s.led[n] = s.up[n]
			s.slow[n] = n == slow
		}
		return s
	}
	v := judge(names, []etcdSample{look(0, "", ""), look(1, "a", "b"), look(2, "a", ""), look(3, "", "a"), look(4, "", "")})
	if v.minUp != 2 || v.slow != 2 {
		t.Errorf("want at least 2 up and 2 slow answers, got %s", v)
	}
	if got, want := v.down["a"], []time.Duration{3 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("a's down stretches: got %v, want %v (its slow answer is taken as down, as the look before)", got, want)
	}
	if got := v.down["b"]; len(got) != 0 {
		t.Errorf("b was counted down for a slow answer: %v", got)
	}
}
