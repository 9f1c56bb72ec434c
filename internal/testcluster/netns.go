package testcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Tests that need node addresses (kubeadm refuses loopback advertise
// addresses, and a control plane of several nodes needs several) run in a
// network namespace they create themselves: the test binary re-executes
// itself under `unshare -rn` (a new user and network namespace, which needs
// no privilege), puts documentation addresses on that namespace's loopback
// device, and every connection it makes stays inside. Outside such a
// namespace tests connect to 127.0.0.0/8 only.

// NetnsEnv is set in a test binary that ReexecInNetns started.
const NetnsEnv = "KUBEADMCFG_TEST_NETNS"

// InTestNetns reports whether this process runs in a network namespace its
// own test created.
func InTestNetns() bool { return os.Getenv(NetnsEnv) == "1" }

// ReexecInNetns runs the test binary again inside a new user and network
// namespace, running only the tests matching run, with env (nil: this
// process's environment), and passes its output to out line by line. It
// returns an error when the tests there fail.
func ReexecInNetns(ctx context.Context, run string, timeout time.Duration, env []string, out func(line string)) error {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return fmt.Errorf("unshare (util-linux) is needed to create the test's own network namespace: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, unshare, "--user", "--map-root-user", "--net", "--", self,
		"-test.run", run, "-test.v", "-test.count=1", "-test.timeout", timeout.String())
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(slices.Clip(env), NetnsEnv+"=1")
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			out(sc.Text())
		}
	}()
	err = cmd.Wait()
	_ = w.Close()
	<-done
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return fmt.Errorf("the tests in the network namespace failed (exit %d)", exitErr.ExitCode())
	}
	return err
}

// SetUpLoopback brings the namespace's loopback device up and puts addrs on
// it (/32 each), skipping those it already has: a test may start more than
// one control plane in its namespace. It refuses to run anywhere but in the
// test's own network namespace.
func SetUpLoopback(addrs ...string) error {
	if !InTestNetns() {
		return errors.New("refusing to change network interfaces outside the test's own network namespace")
	}
	have := map[string]bool{}
	if lo, err := net.InterfaceByName("lo"); err == nil {
		existing, err := lo.Addrs()
		if err != nil {
			return fmt.Errorf("read the loopback device's addresses: %w", err)
		}
		for _, a := range existing {
			have[a.String()] = true
		}
	}
	cmds := [][]string{{"link", "set", "lo", "up"}}
	for _, a := range addrs {
		if !have[a+"/32"] {
			cmds = append(cmds, []string{"addr", "add", a + "/32", "dev", "lo"})
		}
	}
	for _, args := range cmds {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// FailureLines picks, from the verbose output of a test binary (go test
// -v), the lines that say why it failed: the "--- FAIL" lines, and the
// lines a failed test logged itself ("file.go:N: ...", not their
// continuation lines) while it was the test running, for the failed tests
// none of whose subtests failed. A test whose steps are subtests logs its
// setup under its own name; what failed is in the step. At most max lines,
// each cut at 400 bytes. A failing test's whole output can run to
// thousands of lines (its cluster's and its agents' logs): these come
// first, so that a reader, or a CI excerpt, meets them before the rest.
func FailureLines(output []string, max int) []string {
	failed := map[string]bool{}
	for _, l := range output {
		if name, ok := failName(l); ok {
			failed[name] = true
		}
	}
	leaf := func(name string) bool {
		if !failed[name] {
			return false
		}
		for other := range failed {
			if strings.HasPrefix(other, name+"/") {
				return false
			}
		}
		return true
	}
	var out []string
	current := ""
	for _, l := range output {
		if len(out) == max {
			break
		}
		if name, ok := sectionName(l); ok {
			current = name
			continue
		}
		_, isFail := failName(l)
		if isFail || (leaf(current) && loggedLine.MatchString(l)) {
			if len(l) > 400 {
				l = l[:400] + "..."
			}
			out = append(out, l)
		}
	}
	return out
}

// loggedLine is the first line of what a test logged: t.Log and t.Error
// write "file.go:N: message", indented.
var loggedLine = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)

// sectionName reads go test -v's "=== RUN", "=== NAME" and "=== CONT"
// lines: the test whose output follows.
func sectionName(l string) (string, bool) {
	for _, p := range []string{"=== RUN ", "=== NAME ", "=== CONT "} {
		if rest, ok := strings.CutPrefix(l, p); ok {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}

// failName reads a "--- FAIL: NAME (D)" line, indented by its depth.
func failName(l string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(l), "--- FAIL: ")
	if !ok {
		return "", false
	}
	name, _, _ := strings.Cut(rest, " (")
	return name, true
}
