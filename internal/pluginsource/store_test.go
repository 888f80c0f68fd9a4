package pluginsource

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/informer-host/informer-host/internal/ociartifact"
)

// TestDirStoreReadsWhatABundleLoaded: `bundle load --cache DIR` writes
// the module store's records (a manifest digest beside the module's), and
// a daemon whose sourceCache is DIR starts from them with no registry.
func TestDirStoreReadsWhatABundleLoaded(t *testing.T) {
	dir := t.TempDir()
	module := []byte("\x00asm\x01\x00\x00\x00 a module")
	ms := ociartifact.Store{Dir: dir}
	mod, _, err := ms.Put(module)
	if err != nil {
		t.Fatal(err)
	}
	manifest := "sha256:" + string(bytes.Repeat([]byte("ab"), 32))
	src := "oci://127.0.0.1:5000/org/a:v1"
	if err := ms.SaveRecord(ociartifact.Record{Source: src, ModuleDigest: mod, ManifestDigest: manifest}); err != nil {
		t.Fatal(err)
	}
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := s.LastGood(src)
	if !ok || rec.Digest != manifest {
		t.Fatalf("LastGood(%s) = %+v, %t; want the manifest digest %s", src, rec, ok, manifest)
	}
	if p, ok := s.Path(manifest); !ok || p != ms.Path(mod) {
		t.Fatalf("Path(manifest) = %q, %t; want the module's file %s", p, ok, ms.Path(mod))
	}
}

// TestDirStoreKeepsModulesContentAddressed: a version named by a manifest
// digest is stored under its module's sha256 (the module store removes a
// file whose content does not match its name) and found again by the
// version, and its record carries both digests.
func TestDirStoreKeepsModulesContentAddressed(t *testing.T) {
	dir := t.TempDir()
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	module := []byte("\x00asm\x01\x00\x00\x00 another")
	manifest := "sha256:" + string(bytes.Repeat([]byte("cd"), 32))
	path, err := s.Put(manifest, module)
	if err != nil {
		t.Fatal(err)
	}
	mod, _, _ := ociartifact.Store{Dir: dir}.Put(module)
	if want := (ociartifact.Store{Dir: dir}).Path(mod); path != want {
		t.Fatalf("Put stored at %s, want the module's own name %s", path, want)
	}
	if p, ok := s.Path(manifest); !ok || p != path {
		t.Fatalf("Path(manifest) = %q, %t", p, ok)
	}
	src := "oci://127.0.0.1:5000/org/b:v1"
	at := time.Now().UTC().Truncate(time.Second)
	if err := s.SetLastGood(src, Record{Digest: manifest, Verified: true, Signer: "k", Policy: "sha256:policy", At: at}); err != nil {
		t.Fatal(err)
	}
	r, ok, err := ociartifact.Store{Dir: dir}.LoadRecord(src)
	if err != nil || !ok || r.ModuleDigest != mod || r.ManifestDigest != manifest || !r.Verified || r.Signer != "k" {
		t.Fatalf("record = %+v, %t, %v", r, ok, err)
	}
	// The policy the verification holds under survives a restart.
	if got, ok := s.LastGood(src); !ok || got.Digest != manifest || !got.Verified || got.Policy != "sha256:policy" || !got.At.Equal(at) {
		t.Fatalf("LastGood = %+v, %t", got, ok)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
