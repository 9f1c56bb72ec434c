package etcd

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

// trickle is a stream that sends a byte every gap, count times, then ends;
// with stall, it stops sending and waits for its context instead.
func trickle(gap time.Duration, count int, stall bool) func(context.Context) (io.ReadCloser, error) {
	return func(ctx context.Context) (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() {
			for range count {
				select {
				case <-ctx.Done():
					pw.CloseWithError(ctx.Err())
					return
				case <-time.After(gap):
				}
				if _, err := pw.Write([]byte{'x'}); err != nil {
					return
				}
			}
			if stall {
				<-ctx.Done()
				pw.CloseWithError(ctx.Err())
				return
			}
			pw.Close()
		}()
		return pr, nil
	}
}

// A snapshot may take many times the idle limit as long as bytes keep
// coming; one that stops sending fails, and says so.
func TestWatchedStream(t *testing.T) {
	const idle = 200 * time.Millisecond
	var got []byte
	consume := func(r io.Reader) (err error) {
		got, err = io.ReadAll(r)
		return err
	}
	if err := watched(context.Background(), idle, trickle(idle/5, 25, false), consume); err != nil || len(got) != 25 {
		t.Fatalf("a stream 5 times longer than the idle limit, never idle: %v after %d bytes", err, len(got))
	}
	err := watched(context.Background(), idle, trickle(idle/5, 3, true), consume)
	if !errors.Is(err, errStalled) || err.Error() != "no data for 200ms: the stream stalled; nothing was kept" {
		t.Fatalf("a stalled stream: %v", err)
	}
	err = watched(context.Background(), idle, func(ctx context.Context) (io.ReadCloser, error) {
		<-ctx.Done() // a server that never answers the call
		return nil, ctx.Err()
	}, consume)
	if !errors.Is(err, errStalled) {
		t.Fatalf("a stream that never starts: %v", err)
	}
}
