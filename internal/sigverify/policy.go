package sigverify

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Policy is what one plugin's artifact (or every plugin without its own)
// must be signed with.
type Policy struct {
	// Required refuses an artifact that is unsigned or whose signatures
	// do not verify. When false, Verify reports the same outcome and lets
	// the artifact through.
	Required bool
	// Keys are files holding PEM public keys ("PUBLIC KEY", as cosign's
	// cosign.pub). A signature verified by any of them is accepted.
	Keys []string
	// Identities are the keyless signers accepted; any one matching is
	// enough. They need TrustedRoot.
	Identities []Identity
	// TrustedRoot is the path of a trusted_root.json (the sigstore
	// protobuf-specs TrustedRoot: Fulcio CAs, Rekor logs, timestamp
	// authorities). It is read from disk, never fetched; like the
	// keys, it is read again at each verification, so a file replaced
	// takes effect at the next one.
	TrustedRoot string
}

// Identity is one keyless signer: the certificate's OIDC issuer and its
// subject (the SAN: an email, a workflow URI), each exact or as a
// regular expression (Go syntax, matched against the whole value only
// if the expression anchors itself).
type Identity struct {
	Issuer        string
	IssuerRegExp  string
	Subject       string
	SubjectRegExp string
}

func (id Identity) String() string {
	issuer := id.Issuer
	if issuer == "" {
		issuer = "~" + id.IssuerRegExp
	}
	subject := id.Subject
	if subject == "" {
		subject = "~" + id.SubjectRegExp
	}
	return issuer + "=" + subject
}

// policyKey is one loaded public key.
type policyKey struct {
	file        string
	fingerprint string // sha256 of the PKIX DER, hex
	verifier    signature.Verifier
}

// compiled is a Policy loaded: keys parsed, trusted root read,
// identities built, and a fingerprint of all of it for the cache.
type compiled struct {
	required    bool
	keys        []policyKey
	identities  []verify.CertificateIdentity
	idNames     []string
	trusted     root.TrustedMaterial
	fingerprint string
}

// policyFiles are the contents of the files a Policy names, by path, and
// a hash of them all: what a Verifier compares to notice a file replaced.
type policyFiles struct {
	content map[string][]byte
	sum     [sha256.Size]byte
}

// readPolicyFiles reads the key and trusted root files of p. Its errors
// name the file.
func readPolicyFiles(p Policy) (policyFiles, error) {
	f := policyFiles{content: map[string][]byte{}}
	h := sha256.New()
	read := func(what, file string) error {
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("signature policy %s %s: %w", what, file, err)
		}
		f.content[file] = b
		fmt.Fprintf(h, "%q %d\n", file, len(b))
		h.Write(b)
		return nil
	}
	for _, file := range p.Keys {
		if err := read("key", file); err != nil {
			return f, err
		}
	}
	if p.TrustedRoot != "" {
		if err := read("trusted root", p.TrustedRoot); err != nil {
			return f, err
		}
	}
	copy(f.sum[:], h.Sum(nil))
	return f, nil
}

// compile builds p from its files as read. Every error names the file or
// field and what to do.
func compile(p Policy, files policyFiles) (*compiled, error) {
	c := &compiled{required: p.Required}
	h := sha256.New()
	fmt.Fprintf(h, "sigverify policy v1\n")
	for _, file := range p.Keys {
		b := files.content[file]
		pub, err := cryptoutils.UnmarshalPEMToPublicKey(b)
		if err != nil {
			return nil, fmt.Errorf("signature policy key %s: not a PEM public key (%v): give the public half, a \"-----BEGIN PUBLIC KEY-----\" file such as cosign.pub", file, err)
		}
		k, err := loadKey(file, pub)
		if err != nil {
			return nil, err
		}
		c.keys = append(c.keys, k)
	}
	fps := make([]string, 0, len(c.keys))
	for _, k := range c.keys {
		fps = append(fps, k.fingerprint)
	}
	sort.Strings(fps)
	fmt.Fprintf(h, "keys %s\n", strings.Join(fps, ","))

	for i, id := range p.Identities {
		if id.Subject == "" && id.SubjectRegExp == "" {
			return nil, fmt.Errorf("signature policy identity %d: no subject: give the certificate subject (an email, a workflow URI) exactly or as a regular expression", i+1)
		}
		if id.Issuer == "" && id.IssuerRegExp == "" {
			return nil, fmt.Errorf("signature policy identity %d (%s): no issuer: give the OIDC issuer (for example https://token.actions.githubusercontent.com) exactly or as a regular expression", i+1, id.Subject+id.SubjectRegExp)
		}
		for _, re := range []string{id.IssuerRegExp, id.SubjectRegExp} {
			if re == "" {
				continue
			}
			if _, err := regexp.Compile(re); err != nil {
				return nil, fmt.Errorf("signature policy identity %d: regular expression %q: %v", i+1, re, err)
			}
		}
		ci, err := verify.NewShortCertificateIdentity(id.Issuer, id.IssuerRegExp, id.Subject, id.SubjectRegExp)
		if err != nil {
			return nil, fmt.Errorf("signature policy identity %d (%s): %w", i+1, id, err)
		}
		c.identities = append(c.identities, ci)
		c.idNames = append(c.idNames, id.String())
		fmt.Fprintf(h, "identity %q %q %q %q\n", id.Issuer, id.IssuerRegExp, id.Subject, id.SubjectRegExp)
	}

	if p.TrustedRoot != "" {
		raw := files.content[p.TrustedRoot]
		tr, err := root.NewTrustedRootFromJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("signature policy trusted root %s: not a sigstore trusted_root.json (%v): mount the trusted root of your sigstore instance (for the public one, the trusted_root.json of its TUF repository, or `cosign trusted-root create`)", p.TrustedRoot, err)
		}
		c.trusted = tr
		sum := sha256.Sum256(raw)
		fmt.Fprintf(h, "trusted root %x\n", sum)
	}
	if len(c.identities) > 0 && c.trusted == nil {
		return nil, errors.New("signature policy: identities need a trusted root to check their certificates against: set the trusted root to a mounted trusted_root.json")
	}
	if p.Required && len(c.keys) == 0 && len(c.identities) == 0 {
		return nil, errors.New("signature policy: signatures are required but the policy names no key and no identity to verify them with: add a public key file or an identity")
	}
	c.fingerprint = hex.EncodeToString(h.Sum(nil))
	return c, nil
}

func loadKey(file string, pub crypto.PublicKey) (policyKey, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return policyKey{}, fmt.Errorf("signature policy key %s: %w", file, err)
	}
	sum := sha256.Sum256(der)
	v, err := signature.LoadDefaultVerifier(pub)
	if err != nil {
		return policyKey{}, fmt.Errorf("signature policy key %s: unsupported key (%v): use an ECDSA (P-256, P-384, P-521), RSA or Ed25519 key", file, err)
	}
	return policyKey{file: file, fingerprint: hex.EncodeToString(sum[:]), verifier: v}, nil
}

// signer names a key in results: the file and the start of the key's
// sha256 fingerprint, which survives a rename.
func (k policyKey) signer() string {
	return fmt.Sprintf("key %s (sha256:%s)", k.file, k.fingerprint[:16])
}
