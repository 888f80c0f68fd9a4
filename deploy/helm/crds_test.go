package helm

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The chart's crds/ are copies of deploy/crds/, byte for byte, no more
// and no fewer: Helm installs the CRDs only from the chart's own folder,
// and deploy/crds/ is where they are generated.
func TestCRDsAreDeployCRDs(t *testing.T) {
	list := func(dir string) []string {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range files {
			names = append(names, filepath.Base(f))
		}
		return names
	}
	src, dst := filepath.Join("..", "crds"), filepath.Join(chart, "crds")
	want, got := list(src), list(dst)
	if !slices.Equal(got, want) {
		t.Fatalf("%s holds %q, %s holds %q: copy them (cp deploy/crds/*.yaml deploy/helm/informer-host/crds/)", dst, got, src, want)
	}
	for _, name := range want {
		a, errA := os.ReadFile(filepath.Join(src, name))
		b, errB := os.ReadFile(filepath.Join(dst, name))
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if string(a) != string(b) {
			t.Errorf("%s differs from %s: copy it (cp deploy/crds/*.yaml deploy/helm/informer-host/crds/)", filepath.Join(dst, name), filepath.Join(src, name))
		}
	}
}
