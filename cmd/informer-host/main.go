// Command informer-host runs client-go's shared informer pipeline for the
// resources named in a YAML file and delivers their events to WebAssembly
// plugins.
//
//	informer-host run      --config config.yaml   run until SIGINT/SIGTERM
//	informer-host validate --config config.yaml   check the file; exit 1 on problems
//	informer-host rbac     --config config.yaml   print the least-privilege RBAC for the config
//	informer-host finalizers release -config config.yaml -plugin X.wasm   release a controller plugin's finalizer
//	informer-host push X.wasm oci://registry/repo:tag    publish a module
//	informer-host verify   oci://REPO@DIGEST --key KEY.pub   verify an artifact's signatures
//	informer-host sign     oci://REPO@DIGEST --key KEY.pem   sign an artifact with a key, offline
//	informer-host version
//
// The package holds flags, output and exit codes only: `run` builds
// daemon.Options from its flags and hands the lifecycle to
// internal/daemon; the other commands call the packages they name.
// Nothing imports it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/informer-host/informer-host/host"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); the
// module version from the build info stands in otherwise.
var version = ""

func main() {
	os.Exit(Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the command line args and returns the exit code. It is main's
// body, separate so tests can run the commands in-process.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "run":
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		return runCommand(ctx, args[1:], stderr, stop, hup)
	case "validate":
		return validateCommand(ctx, args[1:], stdout, stderr)
	case "rbac":
		return rbacCommand(ctx, args[1:], stdout, stderr)
	case "finalizers":
		return finalizersCommand(ctx, args[1:], stdout, stderr)
	case "verify":
		return verifyCommand(ctx, args[1:], stdout, stderr)
	case "sign":
		return signCommand(ctx, args[1:], stdout, stderr)
	case "replay", "record", "inspect", "new":
		return toolkitCommand(ctx, args, stdout, stderr)
	case "push", "pull", "bundle":
		return registryCommand(ctx, args, stdout, stderr)
	case "compile": // the daemon's own child (host.Options.CompileChild), not in usage
		return host.CompileChild(ctx, args[1:], os.Stdin, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "informer-host", versionString())
		return 0
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "informer-host: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: informer-host <command> [flags]

commands:
  run       --config FILE                   run the informers and plugins until SIGINT or SIGTERM
  validate  --config FILE                   check the config file; exit 1 and say what is wrong if it is not valid
  rbac      --config FILE                   print the least-privilege RBAC (ClusterRole, Roles, bindings) the config needs
  finalizers release -config FILE -plugin X.wasm [-deleting-only]   remove a controller plugin's managed finalizer from its objects
  replay    --plugin X.wasm --events FILE   run one plugin offline on recorded events
  record    --config FILE --out FILE        record the events each plugin receives
  inspect   X.wasm | oci://REF              ABI version, imports, exports, and whether it loads (of a module in a registry too)
  push      X.wasm oci://REGISTRY/REPO:TAG  publish a module as a Wasm OCI artifact; prints its digest
  pull      oci://REF [-o FILE]             fetch a module from a registry
  bundle    save -o F.tar [--config FILE] oci://REF...   the modules (every oci:// source of the config) as one OCI layout tar, for a site with no registry
  bundle    load --cache DIR | --config FILE F.tar     a bundle into the daemon's module cache
  new       --lang go|c|wat|assemblyscript|rust NAME   scaffold a plugin project
  verify    oci://REPO[:TAG|@DIGEST] --key KEY.pub | --identity ISSUER=SUBJECT --trusted-root FILE   verify an artifact's signatures; exit 1 if none verifies
  sign      oci://REPO[:TAG|@DIGEST] --key KEY.pem   sign an artifact offline and attach the signature as a cosign v3 bundle referrer
  version                                   print the version

Flags go before or after a command's arguments ("--" ends them). The
commands that reach a registry (push, pull, inspect oci://, bundle save,
sign, verify) take --docker-config FILE, --insecure (plain HTTP, loopback
only) and --timeout (default 2m). Run "informer-host <command> -h" for a
command's flags.
`)
}

// parseFlags parses a command's flags; a false return means exit with code.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, ok bool) {
	if code, ok := parseOnly(fs, args, stderr); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "informer-host %s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return 2, false
	}
	return 0, true
}

// parseOneArg is parseFlags for a command that takes exactly one argument
// after its flags (a module file, a project name); usage is printed when
// it is missing or there are more.
func parseOneArg(fs *flag.FlagSet, args []string, stderr io.Writer, usage string) (arg string, code int, ok bool) {
	if code, ok := parseOnly(fs, args, stderr); !ok {
		return "", code, false
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, usage)
		return "", 2, false
	}
	return fs.Arg(0), 0, true
}

// parseOnly parses the flags, wherever they are among the arguments: -h
// is the usage and exit 0, a bad flag exit 2.
func parseOnly(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(stderr)
	if err := fs.Parse(reorderArgs(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// reorderArgs returns args with every flag (and its value) before the
// arguments, then "--", then the arguments in their order. The flag
// package stops at the first argument, so `pull oci://x -o f` would take
// -o for a second argument; people write flags where they remember them,
// and README shows both orders. A flag's value is never taken for a flag
// or an argument: fs says which flags take one. After "--" all is an
// argument, as for the flag package.
func reorderArgs(fs *flag.FlagSet, args []string) []string {
	var flags, positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name, _, inline := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		f := fs.Lookup(name)
		if inline || f == nil || isBoolFlag(f) || i+1 == len(args) {
			// An unknown flag stays where Parse reports it.
			continue
		}
		i++
		flags = append(flags, args[i])
	}
	return append(append(flags, "--"), positional...)
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
