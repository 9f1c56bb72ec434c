package testcluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// RestoredEtcd is a single etcd member started on the data of a snapshot
// restored with etcdutl, as an operator recovering a cluster would, so a
// test can read what the snapshot holds. It serves plain HTTP on loopback.
type RestoredEtcd struct {
	ClientURL string
	proc      *proc
}

// RestoreEtcdSnapshot restores snapshot with `etcdutl snapshot restore`
// into dir/data and starts etcdBin on it, returning once it answers
// /health.
func RestoreEtcdSnapshot(ctx context.Context, etcdutl, etcdBin, snapshot, dir string) (*RestoredEtcd, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	client, peer := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	data := filepath.Join(dir, "data")
	restore := exec.CommandContext(ctx, etcdutl, "snapshot", "restore", snapshot, "--data-dir", data,
		"--name", "restored", "--initial-cluster", "restored="+peer, "--initial-advertise-peer-urls", peer)
	if out, err := restore.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("etcdutl snapshot restore: %w: %s", err, out)
	}
	logFile, err := os.OpenFile(filepath.Join(dir, "restored.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(etcdBin, "--name=restored", "--data-dir="+data,
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer, "--initial-cluster=restored="+peer,
		"--unsafe-no-fsync", "--log-level=warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &RestoredEtcd{ClientURL: client, proc: &proc{name: "restored", cmd: cmd, done: make(chan struct{})}}
	go func() { _ = cmd.Wait(); close(r.proc.done) }()
	plain := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := health(ctx, plain, client)
		if err == nil {
			return r, nil
		}
		select {
		case <-r.proc.done:
			return nil, fmt.Errorf("etcd on the restored data exited: %s", lastLines(filepath.Join(dir, "restored.log"), 5))
		default:
		}
		if time.Now().After(deadline) {
			r.Stop()
			return nil, fmt.Errorf("etcd on the restored data not healthy: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop ends the restored member.
func (r *RestoredEtcd) Stop() {
	_ = r.proc.cmd.Process.Kill()
	<-r.proc.done
}
