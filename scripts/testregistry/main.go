// Command testregistry serves go-containerregistry's registry on a loopback address for the
// real-stack tests (scripts/real-stack.sh), with small images built offline from Debian's
// busybox-static pushed into it: no network, no Docker.
//
//	testregistry -addr 127.0.0.1:PORT -busybox /bin/busybox
//
// Images (linux/amd64 unless said):
//
//	opx/busybox:1      a busybox rootfs, PATH=/bin
//	opx/busybox-env:1  the same with an ENV that sets variables opx's environment contract
//	                   owns (OPERATORX_CLUSTER, WORLD_SIZE, NCCL_CUMEM_ENABLE, MASTER_PORT)
//	                   and one of its own (OPERATORX_IMAGE_ONLY) and a PATH of its own
//	opx/multi:1        an index with a linux/amd64 and a linux/arm64 manifest
//
// Tests push more (a moved tag) with go-containerregistry's remote package.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// applets are the busybox commands the rootfs links.
var applets = []string{"sh", "true", "false", "env", "printenv", "cat", "ls", "sleep", "id", "echo", "mkdir", "rm", "uname", "test", "["}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	busybox := flag.String("busybox", "/bin/busybox", "a static busybox binary for the images' rootfs")
	flag.Parse()
	err := run(*addr, *busybox) // serves until killed: it returns only on failure
	fmt.Fprintln(os.Stderr, "testregistry:", err)
	os.Exit(1)
}

// run starts the registry, pushes the test images, prints its address and serves; it
// returns only the error that stopped it.
func run(addr, busybox string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	go srv.Serve(ln)
	host := ln.Addr().String()
	layer, err := rootfs(busybox)
	if err != nil {
		return err
	}
	plain, err := image(layer, "amd64", []string{"PATH=/bin"})
	if err != nil {
		return err
	}
	withEnv, err := image(layer, "amd64", []string{"PATH=/image-bin:/bin", "OPERATORX_CLUSTER=from-the-image", "WORLD_SIZE=99",
		"NCCL_CUMEM_ENABLE=0", "MASTER_PORT=1", "OPERATORX_IMAGE_ONLY=kept"})
	if err != nil {
		return err
	}
	arm, err := image(layer, "arm64", []string{"PATH=/bin"})
	if err != nil {
		return err
	}
	index := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: plain, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}})
	for ref, img := range map[string]v1.Image{"opx/busybox:1": plain, "opx/busybox-env:1": withEnv} {
		r, err := name.ParseReference(host+"/"+ref, name.Insecure)
		if err != nil {
			return err
		}
		if err := remote.Write(r, img); err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
	}
	r, err := name.ParseReference(host+"/opx/multi:1", name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.WriteIndex(r, index); err != nil {
		return fmt.Errorf("pushing opx/multi:1: %w", err)
	}
	fmt.Println(host) // ready: the images are in
	select {}
}

// image is an OCI image of one layer for linux/arch with env.
func image(layer v1.Layer, arch string, env []string) (v1.Image, error) {
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Config.Env = env
	cf.Config.Cmd = []string{"/bin/sh"}
	return mutate.ConfigFile(img, cf)
}

// rootfs is a layer holding busybox, its applet links, and the directories a container
// needs.
func rootfs(busybox string) (v1.Layer, error) {
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []struct {
		name string
		mode int64
	}{{"bin/", 0o755}, {"etc/", 0o755}, {"root/", 0o700}, {"tmp/", 0o1777}, {"dev/", 0o755}, {"proc/", 0o755}, {"sys/", 0o755}, {"opx/", 0o755}, {"image-bin/", 0o755}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name, Mode: d.mode}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	for _, a := range applets {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}); err != nil {
			return nil, err
		}
	}
	for name, body := range map[string]string{"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "etc/group": "root:x:0:\n"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}
