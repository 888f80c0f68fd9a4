package ociartifact_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/internal/ociartifact"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
)

// Put is content-addressed and leaves no temporary file; Has notices a
// file that no longer matches its name; records survive a new Store on
// the same directory (a restart) and are keyed by the full reference.
func TestStore(t *testing.T) {
	dir := t.TempDir()
	s := ociartifact.Store{Dir: dir}
	wasm := module("s")
	d, p, err := s.Put(wasm)
	if err != nil {
		t.Fatal(err)
	}
	if d != sha(wasm) || p != s.Path(d) || !s.Has(d) {
		t.Fatalf("put: %s %s has=%v", d, p, s.Has(d))
	}
	if d2, _, err := s.Put(wasm); err != nil || d2 != d {
		t.Errorf("second put: %s %v", d2, err)
	}
	if b, err := s.Read(d, 1<<20); err != nil || !bytes.Equal(b, wasm) {
		t.Errorf("read: %v", err)
	}
	if _, err := s.Read(d, 10); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("read over max: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
	if len(entries) != 1 {
		t.Errorf("%d files in the store, want 1", len(entries))
	}

	rec := ociartifact.Record{Source: "oci://localhost:5000/p:v1", ModuleDigest: d, ManifestDigest: sha([]byte("m")), Format: ociartifact.FormatCNCF}
	if err := s.SaveRecord(rec); err != nil {
		t.Fatal(err)
	}
	again := ociartifact.Store{Dir: dir}
	got, ok, err := again.LoadRecord("oci://localhost:5000/p:v1")
	if err != nil || !ok || got.ModuleDigest != d || got.ManifestDigest != rec.ManifestDigest || got.Time.IsZero() {
		t.Errorf("load record: %+v %v %v", got, ok, err)
	}
	if _, ok, _ := again.LoadRecord("oci://localhost:5000/p:v2"); ok {
		t.Error("a record for a source never saved")
	}
	if err := s.SaveRecord(ociartifact.Record{Source: "oci://nginx", ModuleDigest: d}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.LoadRecord("oci://index.docker.io/library/nginx:latest"); !ok {
		t.Error("oci://nginx and its full form are not one source")
	}

	// A module changed on disk is not had, and its record is no record.
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s.Has(d) {
		t.Error("has a module whose bytes changed")
	}
	if _, ok, _ := s.LoadRecord("oci://localhost:5000/p:v1"); ok {
		t.Error("a record whose module is gone")
	}
	if err := s.SaveRecord(ociartifact.Record{Source: "x", ModuleDigest: "latest"}); err == nil {
		t.Error("a record with no digest saved")
	}
}

// An https source needs its sha256 and gets it checked, within the size
// limit before (Content-Length) and while reading (no Content-Length);
// a file source reads the same way.
func TestFetchHTTPSAndFile(t *testing.T) {
	wasm := module("h")
	big := bytes.Repeat([]byte("x"), 4096)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/p.wasm":
			w.Write(wasm)
		case "/big.wasm":
			w.Header().Set("Content-Length", "4096")
			w.Write(big)
		case "/chunked.wasm":
			w.(http.Flusher).Flush() // no Content-Length
			w.Write(big)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	hc := srv.Client()
	if b, err := ociartifact.FetchHTTPS(ctx, srv.URL+"/p.wasm", sha(wasm), hc, 0); err != nil || !bytes.Equal(b, wasm) {
		t.Errorf("fetch: %v", err)
	}
	if _, err := ociartifact.FetchHTTPS(ctx, srv.URL+"/p.wasm", strings.TrimPrefix(sha(wasm), "sha256:"), hc, 0); err != nil {
		t.Errorf("fetch with the bare hex: %v", err)
	}
	for _, tc := range []struct{ name, url, sha, want string }{
		{"no sha256", srv.URL + "/p.wasm", "", "needs its sha256"},
		{"wrong sha256", srv.URL + "/p.wasm", sha([]byte("other")), "not the sha256"},
		{"bad sha256", srv.URL + "/p.wasm", "abc", "not 64 lowercase hex"},
		{"http", strings.Replace(srv.URL, "https", "http", 1) + "/p.wasm", sha(wasm), "not an https:// URL"},
		{"over max", srv.URL + "/big.wasm", sha(big), "refused before download"},
		{"over max, chunked", srv.URL + "/chunked.wasm", sha(big), "over the limit of 1024"},
		{"not found", srv.URL + "/nope.wasm", sha(wasm), "404"},
	} {
		if _, err := ociartifact.FetchHTTPS(ctx, tc.url, tc.sha, hc, 1024); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}

	f := filepath.Join(t.TempDir(), "p.wasm")
	os.WriteFile(f, wasm, 0o644)
	if b, err := ociartifact.ReadFile("file://"+f, sha(wasm), 0); err != nil || !bytes.Equal(b, wasm) {
		t.Errorf("file source: %v", err)
	}
	if _, err := ociartifact.ReadFile("file://"+f, "", 10); err == nil || !strings.Contains(err.Error(), "over the limit of 10") {
		t.Errorf("file over max: %v", err)
	}
	if _, err := ociartifact.ReadFile("file://"+f, sha(big), 0); err == nil || !strings.Contains(err.Error(), "not the sha256") {
		t.Errorf("file with a wrong pin: %v", err)
	}
	if _, err := ociartifact.ReadFile("file://"+filepath.Dir(f), "", 0); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
}

// A bundle saved from a registry loads into a store with no registry:
// every ref's module, and each ref recorded as its source's last good
// digest, the way a daemon configured with that ref finds it.
func TestBundleSaveLoad(t *testing.T) {
	registrytest.Each(t, func(t *testing.T, reg *registrytest.Server) {
		ctx := context.Background()
		c := client(t, ociartifact.Options{}, reg.Host)
		a, b := module("1"), module("2")
		da, err := c.Push(ctx, a, reg.Ref("air/a:v1"), map[string]string{"k": "v"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Push(ctx, b, reg.Ref("air/b:v2"), nil); err != nil {
			t.Fatal(err)
		}
		refs := []string{"oci://" + reg.Ref("air/a:v1"), reg.Ref("air/b:v2")}
		var buf bytes.Buffer
		if _, err := c.SaveBundle(ctx, refs, &buf); err != nil {
			t.Fatal(err)
		}
		// index.json names each ref in full.
		tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
		var index struct {
			Manifests []struct {
				Digest      string            `json:"digest"`
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Name == "index.json" {
				json.NewDecoder(tr).Decode(&index)
			}
		}
		if len(index.Manifests) != 2 || index.Manifests[0].Annotations[ociartifact.AnnotationRefName] != reg.Ref("air/a:v1") || index.Manifests[0].Digest != da.Digest {
			t.Fatalf("index.json: %+v", index)
		}

		reg.Close() // the air gap
		store := ociartifact.Store{Dir: t.TempDir()}
		loaded, err := ociartifact.LoadBundle(ctx, bytes.NewReader(buf.Bytes()), store, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(loaded) != 2 || !loaded[0].Recorded || loaded[0].ManifestDigest != da.Digest {
			t.Fatalf("loaded %+v", loaded)
		}
		for i, want := range [][]byte{a, b} {
			r, ok, err := store.LoadRecord("oci://" + strings.TrimPrefix(refs[i], "oci://"))
			if err != nil || !ok {
				t.Fatalf("record of %s: %v %v", refs[i], ok, err)
			}
			got, err := store.Read(r.ModuleDigest, 1<<20)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("module of %s: %v", refs[i], err)
			}
		}
		if r, _, _ := store.LoadRecord(refs[0]); r.Annotations["k"] != "v" || r.Format != ociartifact.FormatCNCF {
			t.Errorf("record keeps the manifest's annotations and format: %+v", r)
		}
	})
}

// A bundle that is not a layout, or names a path outside it, is refused.
func TestLoadBundleRefusesBadTars(t *testing.T) {
	store := ociartifact.Store{Dir: t.TempDir()}
	var evil bytes.Buffer
	tw := tar.NewWriter(&evil)
	tw.WriteHeader(&tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
	tw.Write([]byte("x"))
	tw.Close()
	if _, err := ociartifact.LoadBundle(context.Background(), bytes.NewReader(evil.Bytes()), store, 0); err == nil || !strings.Contains(err.Error(), "outside the layout") {
		t.Errorf("a tar escaping its directory: %v", err)
	}
	if _, err := ociartifact.LoadBundle(context.Background(), strings.NewReader("garbage"), store, 0); err == nil {
		t.Error("garbage loaded")
	}
}
