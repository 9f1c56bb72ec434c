// Package casfake makes client-go's fake clientset write as the API server
// does, with compare-and-swap on resourceVersion, for the tests of code
// that relies on it (Leases held and taken over).
package casfake

import (
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Leases makes the fake's Lease writes compare-and-swap on
// resourceVersion, as the API server's are: every write gets a new one,
// and an update of an older copy conflicts. It returns client.
func Leases(client *fake.Clientset) *fake.Clientset {
	rv := 0
	gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
	client.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		l.Namespace = a.GetNamespace()
		rv++
		l.ResourceVersion = strconv.Itoa(rv)
		if err := client.Tracker().Create(gvr, l, l.Namespace); err != nil {
			return true, nil, err
		}
		return true, l, nil
	})
	client.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		l.Namespace = a.GetNamespace()
		current, err := client.Tracker().Get(gvr, l.Namespace, l.Name)
		if err != nil {
			return true, nil, err
		}
		if current.(*coordinationv1.Lease).ResourceVersion != l.ResourceVersion {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), l.Name, nil)
		}
		rv++
		l.ResourceVersion = strconv.Itoa(rv)
		if err := client.Tracker().Update(gvr, l, l.Namespace); err != nil {
			return true, nil, err
		}
		return true, l, nil
	})
	return client
}
