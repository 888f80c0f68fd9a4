package hack

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// `make image` builds the container image without a container engine;
// this reads what it wrote (the OCI layout, with the standard library
// only, and the load tarball) the way a runtime does: the entrypoint, the
// user deploy/base/deployment.yaml requires, and the binary taken out of the
// image's layer, which runs `version`. The Dockerfile is not built here
// (no Docker engine); this is the tested path.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon and its image, which -short leaves out")
	}
	out := t.TempDir()
	const version = "v0.0.0-imagetest"
	cmd := exec.Command("make", "-s", "image", "IMAGE_DIR="+out, "VERSION="+version)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, b)
	}

	oci := filepath.Join(out, "oci")
	blob := func(digest string) []byte {
		t.Helper()
		algo, hex, ok := strings.Cut(digest, ":")
		if !ok {
			t.Fatalf("digest %q", digest)
		}
		b, err := os.ReadFile(filepath.Join(oci, "blobs", algo, hex))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	type descriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Annotations map[string]string `json:"annotations"`
	}
	var index struct{ Manifests []descriptor }
	if b, err := os.ReadFile(filepath.Join(oci, "index.json")); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 || index.Manifests[0].MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Fatalf("index.json: %+v, want one OCI image manifest", index.Manifests)
	}
	if ref := index.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; ref != version {
		t.Errorf("ref.name %q, want %q", ref, version)
	}
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	var config struct {
		OS, Architecture string
		Config           struct {
			Entrypoint, Cmd []string
			User            string
		}
	}
	if err := json.Unmarshal(blob(manifest.Config.Digest), &config); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(config.Config.Entrypoint, []string{"/informer-host"}) {
		t.Errorf("entrypoint %q, want [/informer-host]", config.Config.Entrypoint)
	}
	if config.OS != "linux" {
		t.Errorf("os %q", config.OS)
	}

	// The user: numeric (runAsNonRoot can only check a number) and the
	// deployment's runAsUser.
	b, err := os.ReadFile("../deploy/base/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	if err := yaml.Unmarshal(b, &dep); err != nil {
		t.Fatal(err)
	}
	sc := dep.Spec.Template.Spec.SecurityContext
	if sc == nil || sc.RunAsUser == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Fatalf("deploy/base/deployment.yaml: no runAsNonRoot/runAsUser in the pod securityContext")
	}
	uid, _, _ := strings.Cut(config.Config.User, ":")
	if uid != fmt.Sprint(*sc.RunAsUser) || uid == "0" {
		t.Errorf("image user %q, want uid %d (deploy/base/deployment.yaml runAsUser)", config.Config.User, *sc.RunAsUser)
	}

	// The layers, unpacked as a runtime does; then the binary runs.
	root := t.TempDir()
	files := map[string]*tar.Header{}
	for _, l := range manifest.Layers {
		if l.MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
			t.Fatalf("layer media type %q", l.MediaType)
		}
		zr, err := gzip.NewReader(strings.NewReader(string(blob(l.Digest))))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimSuffix(h.Name, "/")] = h
			if h.Typeflag != tar.TypeReg {
				continue
			}
			dst := filepath.Join(root, filepath.FromSlash(h.Name))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, body, os.FileMode(h.Mode)&0o777); err != nil {
				t.Fatal(err)
			}
		}
	}
	bin := files["informer-host"]
	if bin == nil || bin.Mode&0o001 == 0 {
		t.Fatalf("/informer-host missing or not executable by every user: %+v", bin)
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if !strings.Contains(string(passwd), ":"+uid+":") {
		t.Errorf("/etc/passwd names no user %s:\n%s", uid, passwd)
	}
	if tmp := files["tmp"]; tmp == nil || tmp.Typeflag != tar.TypeDir {
		t.Error("no /tmp in the image")
	}
	got, err := exec.Command(filepath.Join(root, "informer-host"), "version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != "informer-host "+version {
		t.Errorf("the image's binary: version: %v: %q, want %q", err, got, "informer-host "+version)
	}

	// The load tarball names the same image.
	f, err := os.Open(filepath.Join(out, "informer-host.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var loaded []struct {
		Config   string
		RepoTags []string
	}
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Name == "manifest.json" {
			if err := json.NewDecoder(tr).Decode(&loaded); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(loaded) != 1 || !strings.HasSuffix(loaded[0].RepoTags[0], ":"+version) ||
		!strings.HasSuffix(loaded[0].Config, strings.TrimPrefix(manifest.Config.Digest, "sha256:")) {
		t.Errorf("informer-host.tar manifest.json: %+v, want the tag %s and config %s", loaded, version, manifest.Config.Digest)
	}
}
