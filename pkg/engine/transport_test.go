package engine

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestNoWriteRetries (E2): a proxy answers the first write with 503 and
// Retry-After although its backend committed it; a copy sent again is
// answered 409, as the API server answers a copy that meets our own write.
// client-go alone sends the write again by itself and reports the 409 (the
// input provokes the re-send). Wrapped, the write is sent once and the 503
// reaches the engine, which takes it for a write that may have landed. A
// read answered 503 with Retry-After is still retried.
func TestNoWriteRetries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		wrap     bool
		wantPuts int
		want     func(error) bool
	}{
		{"client-go alone", false, 2, apierrors.IsConflict},
		{"wrapped", true, 1, apierrors.IsServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]int{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen[r.Method]++ // client-go sends one request at a time here
				if seen[r.Method] == 1 {
					w.Header().Set("Retry-After", "0")
					w.Header().Set("Content-Type", "text/html")
					w.WriteHeader(http.StatusServiceUnavailable)
					_, _ = w.Write([]byte("<html><body>503 Service Unavailable</body></html>\n"))
					return
				}
				var body any = configMap("2", "0+", "")
				status := http.StatusOK
				if r.Method == http.MethodPut {
					status = http.StatusConflict
					body = &apierrors.NewConflict(cmGVR.GroupResource(), "kubeadm-config", nil).ErrStatus
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_ = json.NewEncoder(w).Encode(body)
			}))
			defer srv.Close()
			cfg := &rest.Config{Host: srv.URL}
			if tc.wrap {
				cfg.Wrap(WrapNoWriteRetries)
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			cms := cs.CoreV1().ConfigMaps("kube-system")
			if _, err := cms.Update(context.Background(), configMap("1", "0+", ""), metav1.UpdateOptions{}); !tc.want(err) {
				t.Fatalf("update answered %v", err)
			}
			if _, err := cms.Get(context.Background(), "kubeadm-config", metav1.GetOptions{}); err != nil {
				t.Fatalf("the read was not retried: %v", err)
			}
			if seen[http.MethodPut] != tc.wantPuts || seen[http.MethodGet] != 2 {
				t.Fatalf("%d writes sent (want %d), %d reads (want 2)", seen[http.MethodPut], tc.wantPuts, seen[http.MethodGet])
			}
		})
	}
}
