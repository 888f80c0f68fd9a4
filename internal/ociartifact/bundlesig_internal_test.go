package ociartifact

import (
	"fmt"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Referrers are sorted as sigverify sorts them: a cosign signature's own
// predicate annotation keeps it a candidate, another predicate makes it
// an attestation, and other artifact types are counted, not fetched.
func TestSortSignatureReferrers(t *testing.T) {
	desc := func(i int, at string, pt string) v1.Descriptor {
		d := v1.Descriptor{ArtifactType: at, Digest: v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%064x", i)}}
		if pt != "" {
			d.Annotations = map[string]string{PredicateAnnotation: pt}
		}
		return d
	}
	bundle := "application/vnd.dev.sigstore.bundle.v0.3+json"
	c := SortSignatureReferrers([]v1.Descriptor{
		desc(1, "", ""),
		desc(2, "application/spdx+json", ""),
		desc(3, bundle, "https://slsa.dev/provenance/v1"),
		desc(4, emptyMediaType, ""),
		desc(5, bundle, SignPredicate),
		desc(6, bundle, ""),
	})
	hexes := func(ds []v1.Descriptor) (out []int) {
		for _, d := range ds {
			var i int
			fmt.Sscanf(d.Digest.Hex, "%x", &i)
			out = append(out, i)
		}
		return out
	}
	if got := fmt.Sprint(hexes(c.Candidates), c.Other, c.Attestations); got != "[5 6 1 4] map[application/spdx+json:1] 1" {
		t.Errorf("candidates (typed, then untyped), other, attestations: %s", got)
	}
}
