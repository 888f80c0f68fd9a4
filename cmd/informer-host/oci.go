package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/informer-host/informer-host/host/inspect"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/ociartifact"
	"github.com/informer-host/informer-host/internal/pluginsource"
)

// registryFlags are the flags every registry command takes (push, pull,
// inspect, bundle save, sign, verify), so that each reaches a registry
// under the same rules: TLS unless --insecure names a loopback registry,
// credentials only from --docker-config, and no wait without end.
type registryFlags struct {
	dockerConfig string
	insecure     bool
	timeout      time.Duration
}

// defaultCommandTimeout bounds a registry command as a whole: long
// enough for a module of tens of MiB over a slow link, short enough that
// a registry that never answers is given up on while someone waits.
const defaultCommandTimeout = 2 * time.Minute

func (f *registryFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dockerConfig, "docker-config", "", "a docker config.json (or a pull Secret's .dockerconfigjson) with the registry's credentials; none: anonymous")
	fs.BoolVar(&f.insecure, "insecure", false, "plain HTTP / no TLS verification for the references' registries (loopback registries only)")
	fs.DurationVar(&f.timeout, "timeout", defaultCommandTimeout, "give up on the registry after this long, for the whole command (0: never)")
}

// given reports whether any flag chose registry settings, which then
// replace a config's.
func (f *registryFlags) given() bool { return f.dockerConfig != "" || f.insecure }

// bound is ctx limited by --timeout.
func (f *registryFlags) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if f.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, f.timeout, errNoAnswer{f.timeout})
}

// explain says that a command gave up because of --timeout, and what to
// do; other errors are returned as they are.
func (f *registryFlags) explain(ctx context.Context, err error) error {
	var na errNoAnswer
	if err != nil && errors.As(context.Cause(ctx), &na) {
		return fmt.Errorf("%w: %v", na, err)
	}
	return err
}

// errNoAnswer is the cause of a command's context ending at --timeout.
type errNoAnswer struct{ after time.Duration }

func (e errNoAnswer) Error() string {
	return fmt.Sprintf("the registry gave no answer within --timeout %s (raise --timeout for a slow registry or a big module)", e.after)
}

// client builds the client for refs: --insecure marks each ref's
// registry insecure, which ociartifact.New refuses for a host that is
// not loopback.
func (f *registryFlags) client(refs ...string) (*ociartifact.Client, error) {
	o := ociartifact.Options{DockerConfig: f.dockerConfig, UserAgent: "informer-host/" + versionString()}
	if f.insecure {
		o.Registries = map[string]ociartifact.Registry{}
		probe, err := ociartifact.New(ociartifact.Options{})
		if err != nil {
			return nil, err
		}
		for _, r := range refs {
			ref, err := probe.ParseReference(r)
			if err != nil {
				return nil, err
			}
			o.Registries[ref.Context().RegistryStr()] = ociartifact.Registry{Insecure: true}
		}
	}
	return ociartifact.New(o)
}

func ociRef(s string) bool { return strings.HasPrefix(s, "oci://") }

// registryCommand dispatches push, pull and bundle.
func registryCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch args[0] {
	case "push":
		return pushCommand(ctx, args[1:], stdout, stderr)
	case "pull":
		return pullCommand(ctx, args[1:], stdout, stderr)
	case "bundle":
		return bundleCommand(ctx, args[1:], stdout, stderr)
	}
	return 2
}

// pushCommand publishes a module as a CNCF Wasm artifact, annotated with
// the ABI version and capabilities it imports, and prints its digest.
func pushCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	var rf registryFlags
	rf.register(fs)
	var extra multiFlag
	fs.Var(&extra, "annotation", "KEY=VALUE, another manifest annotation (repeatable)")
	if code, ok := parseOnly(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 2 || !ociRef(fs.Arg(1)) {
		fmt.Fprintln(stderr, "usage: informer-host push [--docker-config FILE] [--insecure] [--timeout D] [--annotation K=V] FILE.wasm oci://registry/repository:tag")
		return 2
	}
	file, ref := fs.Arg(0), fs.Arg(1)
	wasm, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "informer-host push: %v\n", err)
		return 1
	}
	r, err := inspect.Module(ctx, file, wasm, inspect.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "informer-host push: %v\n", err)
		return 1
	}
	if !r.Loads {
		fmt.Fprintf(stderr, "informer-host push: %s would not load, so it is not pushed:\n", file)
		for _, p := range r.Problems {
			fmt.Fprintln(stderr, "  -", p)
		}
		fmt.Fprintln(stderr, "  `informer-host inspect", file+"` says more")
		return 1
	}
	ann := moduleAnnotations(r, filepath.Base(file))
	for _, kv := range extra {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			fmt.Fprintf(stderr, "informer-host push: --annotation %q: want KEY=VALUE\n", kv)
			return 2
		}
		ann[k] = v
	}
	c, err := rf.client(ref)
	if err != nil {
		fmt.Fprintf(stderr, "informer-host push: %v\n", err)
		return 1
	}
	ctx, cancel := rf.bound(ctx)
	defer cancel()
	d, err := c.Push(ctx, wasm, ref, ann)
	if err != nil {
		fmt.Fprintf(stderr, "informer-host push: %v\n", rf.explain(ctx, err))
		return 1
	}
	fmt.Fprintln(stdout, d.Digest)
	return 0
}

// moduleAnnotations are what push records of a module: the ABI versions
// and capabilities it imports (host/inspect reads them; ociartifact
// knows nothing of modules), its file name and when.
func moduleAnnotations(r *inspect.Report, title string) map[string]string {
	vs := make([]string, len(r.ABIVersions))
	for i, v := range r.ABIVersions {
		vs[i] = fmt.Sprintf("v%d", v)
	}
	caps := slices.Clone(r.Requested)
	slices.Sort(caps)
	return map[string]string{
		ociartifact.AnnotationABIVersion:   strings.Join(vs, ","),
		ociartifact.AnnotationCapabilities: strings.Join(caps, ","),
		ociartifact.AnnotationTitle:        title,
		ociartifact.AnnotationCreated:      time.Now().UTC().Format(time.RFC3339),
	}
}

// pullCommand writes a module from a registry to a file.
func pullCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pull", flag.ContinueOnError)
	var rf registryFlags
	rf.register(fs)
	out := fs.String("o", "", "the file to write; default: the repository's last part + .wasm, in the current directory")
	ref, code, ok := parseOneArg(fs, args, stderr, "usage: informer-host pull [--docker-config FILE] [--insecure] [--timeout D] [-o FILE] oci://registry/repository:tag")
	if !ok {
		return code
	}
	if !ociRef(ref) {
		fmt.Fprintf(stderr, "informer-host pull: %q is not an oci:// reference\n", ref)
		return 2
	}
	c, err := rf.client(ref)
	if err != nil {
		fmt.Fprintf(stderr, "informer-host pull: %v\n", err)
		return 1
	}
	ctx, cancel := rf.bound(ctx)
	defer cancel()
	a, err := c.Pull(ctx, ref)
	if err != nil {
		fmt.Fprintf(stderr, "informer-host pull: %v\n", rf.explain(ctx, err))
		return 1
	}
	file := *out
	if file == "" {
		r, _ := c.ParseReference(ref)
		file = path.Base(r.Context().RepositoryStr()) + ".wasm"
	}
	if err := os.WriteFile(file, a.Bytes, 0o644); err != nil {
		fmt.Fprintf(stderr, "informer-host pull: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s (%s, manifest %s) -> %s\n", ref, a.ModuleDigest, a.Format, a.ManifestDigest, file)
	return 0
}

// formatNames say what each form is, for a person reading inspect: the
// publisher may know the tool better than the media types.
var formatNames = map[ociartifact.Format]string{
	ociartifact.FormatCNCF:      "CNCF Wasm artifact: config " + ociartifact.ConfigMediaType + ", one " + ociartifact.LayerMediaType + " layer",
	ociartifact.FormatWasmLayer: "one " + ociartifact.LayerMediaType + " layer under another config, as oras push writes",
	ociartifact.FormatWasmToOCI: "wasm-to-oci: one " + ociartifact.WasmToOCILayerMediaType + " layer",
	ociartifact.FormatImage:     "an image whose one layer holds " + ociartifact.ImageModuleFile,
}

// remoteReport is inspect's report of a module in a registry: the
// artifact, then the module as inspect reports a file.
type remoteReport struct {
	Reference      string            `json:"reference"`
	From           string            `json:"from"`
	ManifestDigest string            `json:"manifestDigest"`
	IndexDigest    string            `json:"indexDigest,omitempty"`
	Format         string            `json:"format"`
	ModuleDigest   string            `json:"moduleDigest"`
	Size           int               `json:"size"`
	Annotations    map[string]string `json:"annotations,omitempty"`
	Module         *inspect.Report   `json:"module"`
}

// inspectRemote is `inspect oci://...`: pull, describe the artifact, and
// inspect the module it holds.
func inspectRemote(ctx context.Context, ref string, rf registryFlags, asJSON bool, o inspect.Options, stdout, stderr io.Writer) int {
	c, err := rf.client(ref)
	if err != nil {
		fmt.Fprintf(stderr, "informer-host inspect: %v\n", err)
		return 1
	}
	pullCtx, cancel := rf.bound(ctx)
	defer cancel()
	a, err := c.Pull(pullCtx, ref)
	if err != nil {
		fmt.Fprintf(stderr, "informer-host inspect: %v\n", rf.explain(pullCtx, err))
		return 1
	}
	r, _ := c.ParseReference(ref)
	name := path.Base(r.Context().RepositoryStr()) + ".wasm"
	if t := a.Annotations[ociartifact.AnnotationTitle]; t != "" {
		name = t
	}
	mr, err := inspect.Module(ctx, name, a.Bytes, o)
	if err != nil {
		fmt.Fprintf(stderr, "informer-host inspect: %v\n", err)
		return 1
	}
	rr := remoteReport{Reference: a.Ref, From: a.From, ManifestDigest: a.ManifestDigest, IndexDigest: a.IndexDigest,
		Format: string(a.Format), ModuleDigest: a.ModuleDigest, Size: len(a.Bytes), Annotations: a.Annotations, Module: mr}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rr)
	} else {
		fmt.Fprintf(stdout, "reference:  %s\n", rr.Reference)
		if rr.From != rr.Reference {
			fmt.Fprintf(stdout, "from:       %s\n", rr.From)
		}
		fmt.Fprintf(stdout, "manifest:   %s\n", rr.ManifestDigest)
		if rr.IndexDigest != "" {
			fmt.Fprintf(stdout, "index:      %s\n", rr.IndexDigest)
		}
		fmt.Fprintf(stdout, "format:     %s (%s)\n", rr.Format, formatNames[a.Format])
		fmt.Fprintf(stdout, "module:     %s\n", rr.ModuleDigest)
		fmt.Fprintf(stdout, "size:       %d bytes\n", rr.Size)
		keys := make([]string, 0, len(rr.Annotations))
		for k := range rr.Annotations {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if len(keys) > 0 {
			fmt.Fprintln(stdout, "annotations:")
		}
		for _, k := range keys {
			fmt.Fprintf(stdout, "  %s=%s\n", k, rr.Annotations[k])
		}
		printInspect(stdout, mr)
	}
	if !mr.Loads {
		return 1
	}
	return 0
}

// bundleCommand is `bundle save` and `bundle load`.
func bundleCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const usage = "usage: informer-host bundle save -o FILE.tar [--config config.yaml] [oci://...]\n       informer-host bundle load --cache DIR | --config config.yaml FILE.tar"
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "save":
		fs := flag.NewFlagSet("bundle save", flag.ContinueOnError)
		var rf registryFlags
		rf.register(fs)
		out := fs.String("o", "", "the tar to write (required)")
		cfgFile := fs.String("config", "", "take every oci:// source the config names, with its registries and credentials")
		if code, ok := parseOnly(fs, args[1:], stderr); !ok {
			return code
		}
		ctx, cancel := rf.bound(ctx)
		defer cancel()
		refs := fs.Args()
		var cfg *config.Config
		if *cfgFile != "" {
			var err error
			if cfg, err = config.Load(*cfgFile); err != nil {
				fmt.Fprintf(stderr, "informer-host bundle save: %v\n", err)
				return 1
			}
			refs = append(configSources(cfg), refs...)
			if len(refs) == 0 {
				fmt.Fprintf(stderr, "informer-host bundle save: %s names no oci:// source (plugins.modules[].source)\n", *cfgFile)
				return 1
			}
		}
		if *out == "" || len(refs) == 0 {
			fmt.Fprintln(stderr, usage)
			return 2
		}
		for _, r := range refs {
			if !ociRef(r) {
				fmt.Fprintf(stderr, "informer-host bundle save: %q is not an oci:// reference\n", r)
				return 2
			}
		}
		var c *ociartifact.Client
		var err error
		if cfg != nil && !rf.given() {
			// The daemon's own client: the config's registries (CA
			// bundles, mirrors, insecure) and its dockerConfig.
			var o *pluginsource.OCI
			if o, err = pluginsource.NewOCI(cfg); err == nil {
				c = o.Client
			}
		} else {
			c, err = rf.client(refs...)
		}
		if err != nil {
			fmt.Fprintf(stderr, "informer-host bundle save: %v\n", err)
			return 1
		}
		// Written beside the target and renamed, so a failed save leaves
		// no half bundle under the name.
		f, err := os.CreateTemp(filepath.Dir(*out), ".bundle-*.tar")
		if err != nil {
			fmt.Fprintf(stderr, "informer-host bundle save: %v\n", err)
			return 1
		}
		defer os.Remove(f.Name())
		saved, err := c.SaveBundle(ctx, refs, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(f.Name(), *out)
		}
		if err != nil {
			fmt.Fprintf(stderr, "informer-host bundle save: %v\n", rf.explain(ctx, err))
			return 1
		}
		fmt.Fprintf(stdout, "%s: %d module(s)\n", *out, len(refs))
		for _, s := range saved {
			line := fmt.Sprintf("  %s: %d signature(s)", s.Ref, s.Signatures)
			if s.Skipped != "" {
				line += "; skipped " + s.Skipped
			}
			fmt.Fprintln(stdout, line)
		}
		return 0
	case "load":
		fs := flag.NewFlagSet("bundle load", flag.ContinueOnError)
		cache := fs.String("cache", "", "the module cache directory to load into: the daemon's plugins.sourceCache")
		cfgFile := fs.String("config", "", "load into the cache this config's daemon reads (plugins.sourceCache, or its default)")
		file, code, ok := parseOneArg(fs, args[1:], stderr, usage)
		if !ok {
			return code
		}
		if *cache == "" && *cfgFile != "" {
			cfg, err := config.Load(*cfgFile)
			if err == nil {
				*cache, err = cfg.SourceCacheDir()
			}
			if err != nil {
				fmt.Fprintf(stderr, "informer-host bundle load: %v\n", err)
				return 1
			}
		}
		if *cache == "" {
			fmt.Fprintln(stderr, "informer-host bundle load: --cache DIR or --config FILE is required (the daemon's module cache, plugins.sourceCache)")
			return 2
		}
		f, err := os.Open(file)
		if err != nil {
			fmt.Fprintf(stderr, "informer-host bundle load: %v\n", err)
			return 1
		}
		defer f.Close()
		loaded, err := ociartifact.LoadBundle(ctx, f, ociartifact.Store{Dir: *cache}, 0)
		for _, l := range loaded {
			if l.Signature {
				fmt.Fprintf(stdout, "signature %s: in %s, where the daemon looks for signatures before the registry\n", cmpOr(l.Ref, l.ManifestDigest), l.Path)
				continue
			}
			line := fmt.Sprintf("%s: %s (%s)", cmpOr(l.Ref, l.ManifestDigest), l.ModuleDigest, l.Format)
			if !l.Recorded {
				line += " (no full reference: in the cache, but no source's last good version)"
			}
			fmt.Fprintln(stdout, line)
		}
		if err != nil {
			fmt.Fprintf(stderr, "informer-host bundle load: %v\n", err)
			return 1
		}
		return 0
	}
	fmt.Fprintln(stderr, usage)
	return 2
}

// configSources returns the oci:// sources cfg names, in its order.
func configSources(cfg *config.Config) []string {
	var refs []string
	for _, m := range cfg.Plugins.Modules {
		if ociRef(m.Source) {
			refs = append(refs, m.Source)
		}
	}
	return refs
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }
