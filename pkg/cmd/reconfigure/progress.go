package reconfigure

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	reconfigurenode "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// printer writes reconfigure's progress on stderr. On a terminal
// the line a component is waiting on is redrawn in place with the time
// spent; otherwise a line is written only when what is seen changes. With
// -o nothing is written.
type printer struct {
	w       io.Writer
	on, tty bool
	last    string
	drawn   bool
}

func newPrinter(w io.Writer, on bool) *printer {
	p := &printer{w: w, on: on}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// line writes one progress line.
func (p *printer) line(format string, args ...any) {
	if !p.on {
		return
	}
	p.clear()
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *printer) warn(format string, args ...any) {
	p.line("warning: "+format, args...)
}

// clear removes a redrawn status line before another line is written.
func (p *printer) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

// done ends the output: a redrawn line is left as it is.
func (p *printer) done() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

// event prints one of the run's events.
func (p *printer) event(e reconfigurenode.Event) {
	switch e.Kind {
	case reconfigurenode.EventWarning:
		p.warn("%s", e.Message)
	case reconfigurenode.EventRendering:
		p.line("%s", e.Message)
	case reconfigurenode.EventEtcd:
		p.line("etcd: %s", e.Message)
	case reconfigurenode.EventComponent:
		p.component(e.Component)
	}
}

// component prints one of Apply's events.
func (p *printer) component(e controlplane.Event) {
	if !p.on {
		return
	}
	name := e.Component.PodName()
	switch e.Kind {
	case controlplane.EventReplacing:
		if e.Message != "" {
			p.line("%s: backed up its running manifest as %s; replacing it", name, e.Message)
		} else {
			p.line("%s: replacing its manifest", name)
		}
	case controlplane.EventWaiting:
		p.last = ""
		p.line("%s: waiting up to %s for %s", name, e.Limit, e.Message)
	case controlplane.EventStatus:
		if p.tty {
			p.clear()
			fmt.Fprintf(p.w, "%s: %s of %s: %s", name, e.Elapsed.Round(time.Second), e.Limit, e.Message)
			p.drawn = true
			return
		}
		if e.Message != p.last {
			p.last = e.Message
			p.line("%s: %s (%s)", name, e.Message, e.Elapsed.Round(time.Second))
		}
	case controlplane.EventHealthy:
		p.line("%s: healthy after %s", name, e.Elapsed.Round(100*time.Millisecond))
	case controlplane.EventFailed:
		p.line("%s", e.Message) // it names the component
	case controlplane.EventRollingBack:
		p.last = ""
		p.line("%s: rolling back: its previous manifest is back in place", name)
	case controlplane.EventRolledBack:
		p.line("%s: back on its previous manifest, and healthy", name)
	}
}
