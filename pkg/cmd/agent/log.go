package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	nodeagent "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/agent"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The formats of --log-format.
const (
	logFormatText = "text"
	logFormatJSON = "json"
)

// printer writes the agent's events on a stream through a slog.Handler:
// one line each, as text or as a JSON object. Every record carries the
// node's name; an event about a rollout or an upgrade step carries its id,
// version, step and phase as keys.
type printer struct {
	h slog.Handler
	// hint adds to an error the flag that fixes it, when there is one.
	hint func(error) error
}

// newPrinter writes node's events on w in format (text unless it is
// json: Validate refuses any other).
func newPrinter(format string, w io.Writer, node string, hint func(error) error) *printer {
	var h slog.Handler = &lineHandler{w: w}
	if format == logFormatJSON {
		h = slog.NewJSONHandler(w, nil)
	}
	return &printer{h: h.WithAttrs([]slog.Attr{slog.String("node", node)}), hint: hint}
}

// print writes e: its time is the API server's (the event's), not the
// local clock's, and its message ends with the flag that fixes its error.
func (p *printer) print(e nodeagent.Event) {
	level := slog.LevelInfo
	if e.Warning {
		level = slog.LevelWarn
	}
	msg := e.Message
	if e.Err != nil {
		plain, hinted := exitcode.Message(e.Err), exitcode.Message(p.hint(e.Err))
		if rest, ok := strings.CutPrefix(hinted, plain); ok && rest != "" {
			msg += " (" + strings.TrimPrefix(rest, "; ") + ")"
		}
	}
	r := slog.NewRecord(e.Time.UTC(), level, msg, 0)
	r.AddAttrs(slog.String("reason", e.Reason))
	if e.Rollout != 0 {
		r.AddAttrs(slog.Int64("rollout", e.Rollout))
	}
	for _, kv := range [][2]string{{"upgrade", e.Upgrade}, {"step", e.Step}, {"phase", e.Phase}} {
		if kv[1] != "" {
			r.AddAttrs(slog.String(kv[0], kv[1]))
		}
	}
	if e.Err != nil {
		r.AddAttrs(slog.String("error", exitcode.Message(e.Err)))
	}
	_ = p.h.Handle(context.Background(), r)
}

// lineHandler writes a record as the agent's text line: its time (RFC3339,
// UTC), info or warning, its reason and its message on one line:
//
//	2026-12-05T03:04:05Z info NodeStarted: node cp-0 started its turn in rollout 7: changing kube-apiserver
//
// Its other keys are the JSON format's: the message says them in words.
// slog's TextHandler writes key=value pairs, which is not this line.
type lineHandler struct {
	mu sync.Mutex
	w  io.Writer
}

// Enabled, Handle, WithAttrs and WithGroup make it a slog.Handler.
func (h *lineHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	level := "info"
	if r.Level >= slog.LevelWarn {
		level = "warning"
	}
	reason := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "reason" {
			reason = a.Value.String()
			return false
		}
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := fmt.Fprintf(h.w, "%s %s %s: %s\n", r.Time.UTC().Format(time.RFC3339), level, reason, strings.ReplaceAll(r.Message, "\n", " "))
	return err
}

func (h *lineHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *lineHandler) WithGroup(string) slog.Handler { return h }
