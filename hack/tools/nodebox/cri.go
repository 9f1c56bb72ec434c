package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"sync"
	"syscall"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// serveCRI serves the CRI v1 runtime and image services on a unix socket,
// for a node that runs no containers: the runtime reports itself ready,
// its configuration (the systemd cgroup driver, a sandbox image), and an
// image store that holds what was pulled, or given with --image. That is
// what kubeadm's preflight asks of a runtime (ContainerRuntimeVersion:
// Version, RuntimeConfig; the image pull: ImageFsInfo, Status, ImageStatus,
// PullImage). Everything else is unimplemented. Every call is logged, one
// line each, so that a test can see what kubeadm asked for.
func serveCRI(args []string) error {
	fs := flag.NewFlagSet("cri", flag.ContinueOnError)
	socket := fs.String("socket", "", "the unix socket to serve on (replaced if it exists)")
	sandbox := fs.String("sandbox-image", "", "the sandbox (pause) image the runtime reports in its configuration")
	var images stringList
	fs.Var(&images, "image", "an image the store holds from the start (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *socket == "" || fs.NArg() > 0 {
		return errors.New("usage: nodebox cri --socket PATH [--sandbox-image IMAGE] [--image IMAGE]")
	}
	// A unix socket's path is at most 107 bytes, which a node's root in a
	// temporary directory may exceed: bind it from its directory.
	if err := os.Chdir(filepath.Dir(*socket)); err != nil {
		return err
	}
	name := filepath.Base(*socket)
	if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l, err := net.Listen("unix", name)
	if err != nil {
		return err
	}
	logger := log.New(os.Stderr, "cri: ", log.LstdFlags|log.Lmicroseconds)
	store := &imageStore{images: map[string]bool{}, log: logger}
	for _, img := range images {
		store.images[img] = true
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, &runtimeService{sandboxImage: *sandbox, log: logger})
	runtimeapi.RegisterImageServiceServer(srv, store)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		srv.Stop()
	}()
	logger.Printf("serving CRI v1 on %s", *socket)
	err = srv.Serve(l)
	_ = os.Remove(name)
	return err
}

type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// runtimeService is a runtime with no containers.
type runtimeService struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	sandboxImage string
	log          *log.Logger
}

func (r *runtimeService) Version(_ context.Context, _ *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	r.log.Print("Version")
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "nodebox", RuntimeVersion: "0.1.0", RuntimeApiVersion: "v1"}, nil
}

func (r *runtimeService) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	r.log.Printf("Status verbose=%v", req.Verbose)
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, {Type: runtimeapi.NetworkReady, Status: true},
	}}}
	if req.Verbose && r.sandboxImage != "" {
		// containerd's verbose status carries its configuration as JSON
		// under "config"; kubeadm reads sandboxImage from it.
		config, err := json.Marshal(map[string]string{"sandboxImage": r.sandboxImage})
		if err != nil {
			return nil, err
		}
		resp.Info = map[string]string{"config": string(config)}
	}
	return resp, nil
}

func (r *runtimeService) RuntimeConfig(_ context.Context, _ *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	r.log.Print("RuntimeConfig")
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_SYSTEMD}}, nil
}

func (r *runtimeService) ListPodSandbox(_ context.Context, _ *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	r.log.Print("ListPodSandbox")
	return &runtimeapi.ListPodSandboxResponse{}, nil
}

// imageStore holds image names: pulling one adds it.
type imageStore struct {
	runtimeapi.UnimplementedImageServiceServer
	log    *log.Logger
	mu     sync.Mutex
	images map[string]bool
}

func imageOf(name string) *runtimeapi.Image {
	sum := sha256.Sum256([]byte(name))
	return &runtimeapi.Image{Id: "sha256:" + hex.EncodeToString(sum[:]), RepoTags: []string{name}, Size: 1}
}

func (s *imageStore) ListImages(_ context.Context, _ *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	s.log.Print("ListImages")
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.images))
	for name := range s.images {
		names = append(names, name)
	}
	sort.Strings(names)
	resp := &runtimeapi.ListImagesResponse{}
	for _, name := range names {
		resp.Images = append(resp.Images, imageOf(name))
	}
	return resp, nil
}

func (s *imageStore) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	name := req.GetImage().GetImage()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log.Printf("ImageStatus %s present=%v", name, s.images[name])
	if !s.images[name] {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	return &runtimeapi.ImageStatusResponse{Image: imageOf(name)}, nil
}

func (s *imageStore) PullImage(_ context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	name := req.GetImage().GetImage()
	if name == "" {
		return nil, errors.New("no image to pull")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.images[name] = true
	s.log.Printf("PullImage %s", name)
	return &runtimeapi.PullImageResponse{ImageRef: imageOf(name).Id}, nil
}

func (s *imageStore) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	name := req.GetImage().GetImage()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.images, name)
	s.log.Printf("RemoveImage %s", name)
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (s *imageStore) ImageFsInfo(_ context.Context, _ *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	s.log.Print("ImageFsInfo")
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/nodebox"}, UsedBytes: &runtimeapi.UInt64Value{Value: 0},
	}}}, nil
}
