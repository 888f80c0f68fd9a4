package pluginsource

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/informer-host/informer-host/internal/config"
)

// PolicyFingerprint names what a verify policy trusts by content: the
// bytes of its key files, its identities and the bytes of its trusted
// root, so that a key file replaced under the same name is another
// policy and two plugins naming the same keys from different paths are
// one. Required is left out: it decides what a refusal does, not whether
// a signature verifies. nil (no policy) is "".
//
// A verification is trusted only under the fingerprint it was made
// under (the cache's records carry it, the manager's in-process cache
// is keyed by it); the fingerprint is of public material, so it says
// which policy, not that anyone vouched for the result.
func PolicyFingerprint(p *config.Verify) (string, error) {
	if p == nil {
		return "", nil
	}
	keys := make([]string, 0, len(p.Keys))
	for _, k := range p.Keys {
		b, err := os.ReadFile(k)
		if err != nil {
			return "", fmt.Errorf("verify.keys: %w; the policy cannot be applied until the key file is readable", err)
		}
		keys = append(keys, fmt.Sprintf("%x", sha256.Sum256(b)))
	}
	sort.Strings(keys)
	ids := make([]string, 0, len(p.Identities))
	for _, id := range p.Identities {
		ids = append(ids, fmt.Sprintf("%q %q", id.Issuer, id.Subject))
	}
	sort.Strings(ids)
	root := "default"
	if p.TrustedRoot != "" {
		b, err := os.ReadFile(p.TrustedRoot)
		if err != nil {
			return "", fmt.Errorf("verify.trustedRoot: %w; the policy cannot be applied until the file is readable", err)
		}
		root = fmt.Sprintf("%x", sha256.Sum256(b))
	}
	h := sha256.New()
	fmt.Fprintf(h, "informer-host verify policy v1\nkeys %s\nidentities %s\nroot %s\n",
		strings.Join(keys, ","), strings.Join(ids, ","), root)
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// scrubSource removes from msg (an error from a fetcher or verifier,
// which may quote the URL in its own form: net/http keeps the query and
// writes the password as ***) the secrets of the https:// source raw:
// the whole source, its user info and its query, as written and decoded.
func scrubSource(raw, msg string) string {
	if !strings.HasPrefix(strings.ToLower(raw), "https://") {
		return msg
	}
	msg = strings.ReplaceAll(msg, raw, config.RedactSource(raw))
	u, err := url.Parse(raw)
	if err != nil {
		return msg
	}
	var secrets []string
	if u.User != nil {
		secrets = append(secrets, u.User.String()+"@", u.User.Username()+":***@")
		if pw, ok := u.User.Password(); ok && pw != "" {
			secrets = append(secrets, pw)
		}
	}
	if u.RawQuery != "" {
		secrets = append(secrets, u.RawQuery)
		if q, err := url.QueryUnescape(u.RawQuery); err == nil {
			secrets = append(secrets, q)
		}
	}
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "REDACTED")
	}
	return msg
}
