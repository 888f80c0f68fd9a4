package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/informer-host/informer-host/internal/ociartifact"
	"github.com/informer-host/informer-host/internal/sigverify"
)

// listFlag is a flag that may be given more than once.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// verifyCommand checks the signatures of one artifact in a registry
// against keys or keyless identities (package sigverify): exit 0 when one
// verifies, 1 when none does, 2 on bad usage.
func verifyCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	var keys, identities, identityRes listFlag
	fs.Var(&keys, "key", "a PEM public key file (cosign.pub) to verify with; may be repeated")
	fs.Var(&identities, "identity", "a keyless signer, ISSUER=SUBJECT (exact OIDC issuer and certificate subject); may be repeated; needs --trusted-root")
	fs.Var(&identityRes, "identity-regexp", "a keyless signer as regular expressions, ISSUER_REGEXP=SUBJECT_REGEXP; may be repeated; needs --trusted-root")
	trustedRoot := fs.String("trusted-root", "", "trusted_root.json of the sigstore instance (read from disk, never fetched)")
	cache := fs.String("cache", "", "a JSON file of verified digests to read and update (the daemon's, next to its module store)")
	var rf registryFlags
	rf.register(fs)
	const usage = "usage: informer-host verify [--docker-config FILE] [--insecure] [--timeout D] oci://REGISTRY/REPO[:TAG|@sha256:DIGEST] (--key KEY.pub | --identity ISSUER=SUBJECT --trusted-root trusted_root.json)"
	refArg, code, ok := parseOneArg(fs, args, stderr, usage)
	if !ok {
		return code
	}
	p := sigverify.Policy{Required: true, Keys: keys, TrustedRoot: *trustedRoot}
	for _, kind := range []struct {
		values listFlag
		flag   string
		regexp bool
	}{{identities, "--identity", false}, {identityRes, "--identity-regexp", true}} {
		for _, v := range kind.values {
			issuer, subject, found := strings.Cut(v, "=")
			if !found || issuer == "" || subject == "" {
				fmt.Fprintf(stderr, "informer-host verify: %s %q: want ISSUER=SUBJECT, for example https://token.actions.githubusercontent.com=https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main\n", kind.flag, v)
				return 2
			}
			if kind.regexp {
				p.Identities = append(p.Identities, sigverify.Identity{IssuerRegExp: issuer, SubjectRegExp: subject})
			} else {
				p.Identities = append(p.Identities, sigverify.Identity{Issuer: issuer, Subject: subject})
			}
		}
	}
	if len(p.Keys) == 0 && len(p.Identities) == 0 {
		fmt.Fprintln(stderr, "informer-host verify: nothing to verify with: give --key, or --identity with --trusted-root")
		fmt.Fprintln(stderr, usage)
		return 2
	}
	c, err := rf.client(refArg)
	if err != nil {
		fmt.Fprintln(stderr, "informer-host verify:", err)
		return 1
	}
	ctx, cancel := rf.bound(ctx)
	defer cancel()
	opts := []sigverify.Option{sigverify.WithRemoteOptions(c.RemoteOptions(ctx)...)}
	if *cache != "" {
		c, err := sigverify.OpenCache(*cache)
		if err != nil {
			fmt.Fprintln(stderr, "informer-host verify:", err)
			return 1
		}
		opts = append(opts, sigverify.WithCache(c))
	}
	v, err := sigverify.New(p, opts...)
	if err != nil {
		fmt.Fprintln(stderr, "informer-host verify:", err)
		return 1
	}
	repo, digest, err := resolveOCI(ctx, c, refArg)
	if err != nil {
		fmt.Fprintln(stderr, "informer-host verify:", rf.explain(ctx, err))
		return 1
	}
	res, err := v.Verify(ctx, repo, digest)
	if err != nil {
		if !errors.Is(err, sigverify.ErrRefused) {
			fmt.Fprintln(stderr, "informer-host verify:", rf.explain(ctx, err))
			return 1
		}
		fmt.Fprintf(stdout, "%s@%s: NOT verified: %s\n", repo, digest, res.Reason)
		return 1
	}
	fmt.Fprintf(stdout, "%s@%s: verified, signed by %s\n%s\n", repo, digest, res.Signer, res.Reason)
	return 0
}

// signCommand signs one artifact in a registry with a private key,
// offline, and attaches the signature as a cosign v3 bundle referrer.
func signCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sign", flag.ContinueOnError)
	key := fs.String("key", "", "the PEM private key (cosign.key; its password from $COSIGN_PASSWORD, as cosign reads it)")
	var rf registryFlags
	rf.register(fs)
	const usage = "usage: informer-host sign [--docker-config FILE] [--insecure] [--timeout D] oci://REGISTRY/REPO[:TAG|@sha256:DIGEST] --key KEY.pem"
	refArg, code, ok := parseOneArg(fs, args, stderr, usage)
	if !ok {
		return code
	}
	if *key == "" {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	pem, err := os.ReadFile(*key)
	if err != nil {
		fmt.Fprintln(stderr, "informer-host sign: --key:", err)
		return 1
	}
	c, err := rf.client(refArg)
	if err != nil {
		fmt.Fprintln(stderr, "informer-host sign:", err)
		return 1
	}
	ctx, cancel := rf.bound(ctx)
	defer cancel()
	repo, digest, err := resolveOCI(ctx, c, refArg)
	if err != nil {
		fmt.Fprintln(stderr, "informer-host sign:", rf.explain(ctx, err))
		return 1
	}
	opts := []sigverify.Option{sigverify.WithRemoteOptions(c.RemoteOptions(ctx)...)}
	if pw, ok := os.LookupEnv("COSIGN_PASSWORD"); ok {
		opts = append(opts, sigverify.WithKeyPassword([]byte(pw)))
	}
	ref, err := sigverify.SignWithKey(ctx, repo, digest, pem, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "informer-host sign: %s: %v\n", *key, rf.explain(ctx, err))
		return 1
	}
	fmt.Fprintf(stdout, "%s@%s: signed; signature %s@%s\n", repo, digest, repo, ref)
	return 0
}

// resolveOCI turns oci://registry/repo:tag or @sha256:... into the
// repository and the manifest digest, asking the registry for a tag's
// through c, as every registry command reaches a registry.
func resolveOCI(ctx context.Context, c *ociartifact.Client, s string) (repo, digest string, err error) {
	if !ociRef(s) {
		return "", "", fmt.Errorf("%q: want oci://REGISTRY/REPO[:TAG|@sha256:DIGEST]", s)
	}
	ref, err := c.ParseReference(s)
	if err != nil {
		return "", "", err
	}
	d, err := c.Resolve(ctx, s)
	if err != nil {
		return "", "", fmt.Errorf("resolving %s: %w", s, err)
	}
	return ref.Context().Name(), d.Digest, nil
}
