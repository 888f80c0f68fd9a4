package helm

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/informer-host/informer-host/internal/testenv"
)

// The chart's crds/ are copies of the CRDs of deploy/crds/, byte for
// byte, no more and no fewer: Helm installs CRDs only from the chart's own
// folder (every file there, so not deploy/crds/'s kustomization.yaml), and
// deploy/crds/ is where they are generated.
func TestCRDsAreDeployCRDs(t *testing.T) {
	// list names dir's YAML files; onlyCRDs: those holding a CRD.
	list := func(dir string, onlyCRDs bool) []string {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			objs := testenv.DecodeObjects(t, f, string(b))
			if !onlyCRDs || len(objs) > 0 && objs[0].GetKind() == "CustomResourceDefinition" {
				names = append(names, filepath.Base(f))
			}
		}
		return names
	}
	src, dst := filepath.Join("..", "crds"), filepath.Join(chart, "crds")
	want, got := list(src, true), list(dst, false)
	if !slices.Equal(got, want) {
		t.Fatalf("%s holds %q, %s holds %q: copy them (cp deploy/crds/informer-host.io_*.yaml deploy/helm/informer-host/crds/)", dst, got, src, want)
	}
	for _, name := range want {
		a, errA := os.ReadFile(filepath.Join(src, name))
		b, errB := os.ReadFile(filepath.Join(dst, name))
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if string(a) != string(b) {
			t.Errorf("%s differs from %s: copy it (cp deploy/crds/informer-host.io_*.yaml deploy/helm/informer-host/crds/)", filepath.Join(dst, name), filepath.Join(src, name))
		}
	}
}
