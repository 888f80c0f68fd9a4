// Command image lays out the informer-host container image without a
// container engine or a registry (`make image`): one layer on an empty
// (scratch) base holding the static binary, /etc/passwd and /etc/group
// naming the non-root user deploy/base/deployment.yaml runs as, an empty /tmp
// and, when the build machine has them, the CA certificates. It writes an
// OCI image layout (for skopeo, crane, podman, containerd) and a tarball
// `docker load` and `podman load` read.
//
//	go run . -binary ../../build/image/informer-host -version v1.2.3 \
//	    -oci ../../build/image/oci -tar ../../build/image/informer-host.tar
//
// Every file in the layer has a fixed time and owner, so the same binary
// gives the same image digest.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// uid and gid are the user the image runs as: distroless's "nonroot", the
// runAsUser of deploy/base/deployment.yaml.
const uid, gid = 65532, 65532

func main() {
	binary := flag.String("binary", "", "the static informer-host binary (CGO_ENABLED=0)")
	version := flag.String("version", "dev", "the image's version label and tag")
	repo := flag.String("repo", "ghcr.io/informer-host/informer-host", "the image's repository, for the tag")
	ociDir := flag.String("oci", "", "write an OCI image layout to this directory (replaced)")
	tarPath := flag.String("tar", "", "write a docker/podman load tarball to this file")
	caFile := flag.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to include (skipped if missing)")
	flag.Parse()
	if err := build(*binary, *version, *repo, *ociDir, *tarPath, *caFile); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func build(binary, version, repo, ociDir, tarPath, caFile string) error {
	if binary == "" || (ociDir == "" && tarPath == "") {
		return fmt.Errorf("-binary and one of -oci, -tar are required")
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(caFile)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	layerTar, err := rootfs(bin, ca)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Author: "make image", CreatedBy: "hack/image: informer-host static binary", Created: v1.Time{Time: epoch},
	}})
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = []string{"/informer-host"}
	cf.Config.Cmd = []string{"run", "--config", "/etc/informer-host/config.yaml"}
	cf.Config.User = fmt.Sprintf("%d:%d", uid, gid)
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "informer-host",
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://" + repo,
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	ref := repo + ":" + version
	if ociDir != "" {
		if err := os.RemoveAll(ociDir); err != nil {
			return err
		}
		p, err := layout.Write(ociDir, empty.Index)
		if err != nil {
			return err
		}
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": version,
			"io.containerd.image.name":          ref,
		})); err != nil {
			return err
		}
	}
	if tarPath != "" {
		tag, err := name.NewTag(ref)
		if err != nil {
			return err
		}
		if err := tarball.WriteToFile(tarPath, tag, img); err != nil {
			return err
		}
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s\n", ref, digest)
	return nil
}

// epoch stamps every file and the image itself, for reproducible digests.
var epoch = time.Unix(0, 0).UTC()

// rootfs is the layer: the binary at /informer-host, the user, /tmp.
func rootfs(bin, ca []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: epoch, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	steps := []func() error{
		func() error { return dir("etc/", 0o755) },
		func() error {
			return file("etc/passwd", 0o644, fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, gid))
		},
		func() error { return file("etc/group", 0o644, fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", gid)) },
		func() error { return dir("tmp/", 0o1777) },
		func() error { return file("informer-host", 0o755, bin) },
	}
	if ca != nil {
		steps = append(steps,
			func() error { return dir("etc/ssl/", 0o755) },
			func() error { return dir("etc/ssl/certs/", 0o755) },
			func() error { return file("etc/ssl/certs/ca-certificates.crt", 0o644, ca) })
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
