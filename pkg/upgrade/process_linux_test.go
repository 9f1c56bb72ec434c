package upgrade

import (
	"context"
	"os"
	"testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
)

// The identity proc gives a started COMMAND, recorded as a Process, is
// checked on this node as its process group: running, then ended; a
// Process recorded elsewhere is unknown. (internal/proc tests the group
// itself: a killed leader's children, zombies, pids used again.)
func TestCheckProcessOfACommand(t *testing.T) {
	in, hold, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := proc.Command("cat")
	c.Stdin = in
	cmd, err := c.Start(context.Background())
	in.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { hold.Close(); _ = cmd.Wait() }()
	id := cmd.Identity()
	p := Process{PID: id.PID, StartTicks: id.StartTicks, BootID: id.BootID, PIDNamespace: id.PIDNamespace}
	if p.StartTicks == 0 || p.BootID == "" {
		t.Fatalf("recorded: %+v", p)
	}
	if got := CheckProcess(p); got != CommandRunning {
		t.Fatalf("a running COMMAND: %d", got)
	}
	for name, elsewhere := range map[string]Process{
		"another boot":          {PID: p.PID, StartTicks: p.StartTicks, BootID: "another", PIDNamespace: p.PIDNamespace},
		"another PID namespace": {PID: p.PID, StartTicks: p.StartTicks, BootID: p.BootID, PIDNamespace: "pid:[1]"},
		"no process recorded":   {BootID: p.BootID, PIDNamespace: p.PIDNamespace},
	} {
		if got := CheckProcess(elsewhere); got != CommandUnknown {
			t.Errorf("%s: %d, want unknown", name, got)
		}
	}
	hold.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := CheckProcess(p); got != CommandEnded {
		t.Errorf("an ended COMMAND: %d", got)
	}
}
