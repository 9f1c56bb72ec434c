package exitcode

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestFromError(t *testing.T) {
	cm := schema.GroupResource{Resource: "configmaps"}
	for _, tc := range []struct {
		name string
		err  error
		want Code
	}{
		{"nil", nil, OK},
		{"plain", errors.New("boom"), Failure},
		{"typed", Usagef("bad"), Usage},
		{"typed wrapped", fmt.Errorf("context: %w", Invalidf("bad")), Invalid},
		{"forbidden", apierrors.NewForbidden(cm, "x", errors.New("no")), Forbidden},
		{"unauthorized", apierrors.NewUnauthorized("no"), Forbidden},
		{"not found", apierrors.NewNotFound(cm, "x"), NotFound},
		{"conflict", apierrors.NewConflict(cm, "x", errors.New("rv")), Conflict},
		{"quiet", Quiet(OutOfSync), OutOfSync},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FromError(tc.err); got != tc.want {
				t.Fatalf("FromError(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

func TestMessageIsOneLine(t *testing.T) {
	got := Message(fmt.Errorf("first line\n  second   line%s", "\n"))
	if want := "first line; second line"; got != want {
		t.Fatalf("Message = %q, want %q", got, want)
	}
}

func TestQuietSaysNothing(t *testing.T) {
	if msg := Message(Quiet(OutOfSync)); msg != "" {
		t.Fatalf("Message = %q, want nothing", msg)
	}
}
