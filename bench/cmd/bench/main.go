// Command bench runs informer-host's benchmarks and writes BENCHMARKS.md
// (`make bench`; `make bench-smoke` runs everything once, tiny, to keep
// it working).
//
//	go run ./bench/cmd/bench [-smoke] [-out FILE] [-skip go,3,4,5,6] [-profile DIR]
//
// It runs, in order:
//
//   - the in-process Go benchmarks (go test -bench, -count 5): the
//     dispatch path and the fan-out (./host), the guests' own costs next to
//     native Go code (./host/internal/engine), the filters (./internal/filter);
//   - the end-to-end cases against a real kube-apiserver and etcd (the
//     envtest binaries that `make controlplane` builds), with the daemon
//     and the native client-go baseline as child processes: throughput,
//     latency and CPU (case 3), the peers on the same workload (case 8:
//     shell-operator, one native controller per handler), isolation (case
//     6), reload and start (case 4), pull to first event for a plugin
//     from an OCI registry next to the same module in the plugin
//     directory (case 4p), failover with leader election (case
//     7), time to converge for a controller plugin next to the same
//     controller written natively, with a reload and a restart halfway
//     (case 9), a controller plugin next to the same controller written
//     with controller-runtime (case 10; not under -smoke), many plugins
//     of three kits in one daemon next to 10 (case 11), 50 idle
//     plugins (case 5i), memory (case 5, last: it leaves 50,000 objects
//     behind);
//
// and prints one table, which it also writes, with the machine, the date
// and the command, to the output file. Nothing here judges a time as a
// test failure: the "met" column is the report.
//
// "bench native ..." is the native baseline's child process (native.go),
// "bench native-labeler ..." case 9's native controller
// (native_labeler.go).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/informer-host/informer-host/bench/benchenv"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "native" {
		os.Exit(nativeMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "native-labeler" {
		os.Exit(nativeLabelerMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "spin" {
		// The isolation benchmark's control: one core kept busy until the
		// harness kills this process.
		runtime.GOMAXPROCS(1)
		for x := uint64(1); ; x = x*6364136223846793005 + 1442695040888963407 {
			spinSink = x
		}
	}
	os.Exit(run(os.Args[1:]))
}

var spinSink uint64

func run(args []string) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	smoke := fs.Bool("smoke", false, "run every benchmark once, with tiny sizes: checks that they work, measures nothing")
	out := fs.String("out", "", "report file (default BENCHMARKS.md at the repository root; build/bench/BENCHMARKS.smoke.md with -smoke)")
	skip := fs.String("skip", "", "comma-separated parts to skip: go, 3, 4, 4p, 5, 5i, 6, 6r, 7, 8, 9, 10, 11")
	set := fs.String("set", "", "comma-separated parameter overrides, name=value (see params)")
	daemonBin := fs.String("daemon", "", "informer-host binary to measure (default: built from ./cmd/informer-host)")
	profile := fs.String("profile", "", "directory: every daemon the harness starts writes a CPU profile of its run there (NAME.pprof, NAME its config's name) and a heap profile taken as it begins to stop (NAME.heap.pprof), for `go tool pprof`")
	render := fs.String("render", "", "measure nothing: write the report from a results file (build/bench/results.json)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	root, err := benchenv.Root()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if *out == "" {
		*out = filepath.Join(root, "BENCHMARKS.md")
		if *smoke {
			*out = filepath.Join(root, "build", "bench", "BENCHMARKS.smoke.md")
		}
	}
	if *render != "" {
		b, err := os.ReadFile(*render)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		res := &results{}
		if err := json.Unmarshal(b, res); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return writeReport(res, *out, *smoke, root)
	}
	skipped := map[string]bool{}
	for _, s := range strings.Split(*skip, ",") {
		skipped[strings.TrimSpace(s)] = true
	}
	// Case 10 builds a module of its own and runs thousands of objects
	// through two controllers: minutes that `make test`, which runs the
	// smoke, must not spend. Its helpers have unit tests.
	if *smoke {
		skipped["10"] = true
	}
	work := filepath.Join(root, "build", "bench", "work")
	if *smoke {
		work += "-smoke"
	}
	_ = os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "bench %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}

	p := params(*smoke)
	if err := override(p, *set); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	res := &results{Params: p, Began: time.Now(), Machine: machine(), Go: benchResults{}}
	// The machine's load through the run, for the report's header.
	load := startLoadSampler(10 * time.Second)
	done := func() int {
		res.Load = load.stop()
		return finish(res, *out, *smoke, root)
	}
	fail := func(err error) {
		logf("ERROR: %v", err)
		res.Errors = append(res.Errors, err.Error())
	}

	// Cases 9 and 10 run example plugins, not these.
	needPlugins := false
	for _, c := range []string{"go", "3", "4", "4p", "5", "5i", "6", "6r", "7", "8", "11"} {
		needPlugins = needPlugins || !skipped[c]
	}
	load.phase("build")
	if needPlugins {
		logf("building the benchmark plugins")
	}
	for name := range benchenv.Plugins {
		if !needPlugins {
			break
		}
		if name == "k8sapi" && !p["k8sapi"].(bool) {
			continue
		}
		if _, err := benchenv.Build(name); err != nil {
			fail(err)
			return done()
		}
	}

	if !skipped["go"] {
		load.phase("go")
		logf("Go benchmarks (go test -bench, -benchtime %v, -count %v)", p["benchtime"], p["count"])
		f, err := os.Create(filepath.Join(work, "gobench.txt"))
		if err != nil {
			fail(err)
		} else {
			var w io.Writer = f
			if g, err := runGoBenches(root, p["benchtime"].(string), p["count"].(int), io.MultiWriter(w, os.Stderr)); err != nil {
				fail(err)
				res.Go = g
			} else {
				res.Go = g
			}
			f.Close()
		}
	}

	if !(skipped["3"] && skipped["4"] && skipped["4p"] && skipped["5"] && skipped["5i"] && skipped["6"] && skipped["6r"] && skipped["7"] && skipped["8"] && skipped["9"] && skipped["10"] && skipped["11"]) {
		load.phase("e2e setup")
		h, err := newE2E(root, work, *smoke, *daemonBin, nil, logf)
		if err != nil {
			fail(err)
			return done()
		}
		defer h.close()
		h.daemonEnv = strings.Fields(p["daemonEnv"].(string))
		if *profile != "" {
			if h.profileDir, err = filepath.Abs(*profile); err == nil {
				err = os.MkdirAll(h.profileDir, 0o755)
			}
			if err != nil {
				fail(err)
				return done()
			}
		}
		if !skipped["3"] {
			load.phase("3")
			if res.Throughput, err = h.throughput(p["throughputN"].(int), p["throughputRuns"].(int), p["throughputPlugins"].(int)); err != nil {
				fail(fmt.Errorf("case 3: %w", err))
			}
		}
		if !skipped["8"] {
			load.phase("8")
			if res.Peers, err = h.peers(p["peersN"].(int), p["peersRuns"].(int), p["peersPlugins"].(int), p["peersSides"].(string), p["peersSlowRuns"].(int)); err != nil {
				fail(fmt.Errorf("case 8: %w", err))
			}
		}
		if !skipped["6"] {
			load.phase("6")
			if res.Isolation, err = h.isolation(p["isolationRuns"].(int), p["isolationFor"].(time.Duration)); err != nil {
				fail(fmt.Errorf("case 6: %w", err))
			}
		}
		if !skipped["6r"] {
			load.phase("6r")
			if res.Restart, err = h.restartIsolation(p["isolationRuns"].(int), p["isolationFor"].(time.Duration), p["restartObjects"].(int)); err != nil {
				fail(fmt.Errorf("case 6r: %w", err))
			}
		}
		if !skipped["4"] {
			load.phase("4")
			if res.Reload, res.ReloadControl, err = h.reload(p["reloadRuns"].(int), p["k8sapi"].(bool), p["reloadControl"].(time.Duration)); err != nil {
				fail(fmt.Errorf("case 4 (reload): %w", err))
			}
			if res.Start, err = h.startup(p["startRuns"].(int), p["startPlugins"].(int)); err != nil {
				fail(fmt.Errorf("case 4 (start): %w", err))
			}
		}
		if !skipped["4p"] {
			load.phase("4p")
			if res.Pull, err = h.pull(p["pullRuns"].(int), p["k8sapi"].(bool)); err != nil {
				fail(fmt.Errorf("case 4p (pull): %w", err))
			}
		}
		if !skipped["7"] {
			load.phase("7")
			if res.Failover, err = h.failover(p["failoverRuns"].(int), p["failoverPlugins"].(int)); err != nil {
				fail(fmt.Errorf("case 7: %w", err))
			}
		}
		if !skipped["9"] {
			load.phase("9")
			if res.Converge, err = h.converge(p["convergeN"].(int), p["convergeRuns"].(int), float64(p["convergeQPS"].(int)), p["convergeBurst"].(int)); err != nil {
				fail(fmt.Errorf("case 9: %w", err))
			}
		}
		if !skipped["10"] {
			load.phase("10")
			if res.Copy, err = h.copyCase(p["copyN"].(int), p["copyRuns"].(int), float64(p["copyQPS"].(int)), p["copyBurst"].(int)); err != nil {
				fail(fmt.Errorf("case 10: %w", err))
			}
		}
		if !skipped["11"] {
			load.phase("11")
			if res.Scale, err = h.scale(p["scaleN"].(int), p["scalePlugins"].(string), p["scaleUpdates"].(int), p["scaleRate"].(int), p["memorySettle"].(time.Duration)); err != nil {
				fail(fmt.Errorf("case 11: %w", err))
			}
		}
		if !skipped["5i"] {
			load.phase("5i")
			if res.Idle, err = h.idle(p["memoryRuns"].(int), p["memorySettle"].(time.Duration)); err != nil {
				fail(fmt.Errorf("case 5i: %w", err))
			}
		}
		if !skipped["5"] {
			load.phase("5")
			if res.Memory, err = h.memory(p["memoryN"].(int), p["memoryRuns"].(int), p["memorySettle"].(time.Duration), p["memoryPlugins"].(int), p["memorySides"].(string)); err != nil {
				fail(fmt.Errorf("case 5: %w", err))
			}
		}
	}
	return done()
}

// params are the sizes of a full run and of a smoke run.
func params(smoke bool) map[string]any {
	if smoke {
		return map[string]any{
			"benchtime": "1x", "count": 1,
			"throughputN": 30, "throughputRuns": 1, "throughputPlugins": 2,
			"isolationRuns": 1, "isolationFor": 2 * time.Second,
			"reloadRuns": 1, "k8sapi": false, "reloadControl": time.Second, "startRuns": 1, "startPlugins": 2, "pullRuns": 1,
			"memoryN": 200, "memoryRuns": 1, "memorySettle": 500 * time.Millisecond, "memoryPlugins": 1, "memorySides": "",
			"failoverRuns": 1, "failoverPlugins": 2,
			"peersN": 30, "peersRuns": 1, "peersPlugins": 2, "peersSides": peerSides, "peersSlowRuns": 1,
			"restartObjects": 100, "convergeN": 20, "convergeRuns": 1, "convergeQPS": 50, "convergeBurst": 100,
			"copyN": 20, "copyRuns": 1, "copyQPS": 50, "copyBurst": 100,
			"scaleN": 20, "scalePlugins": "2/4", "scaleUpdates": 20, "scaleRate": 50,
			"daemonEnv": "",
		}
	}
	return map[string]any{
		"benchtime": "0.3s", "count": 5,
		"throughputN": 5000, "throughputRuns": 5, "throughputPlugins": 10,
		"isolationRuns": 3, "isolationFor": 15 * time.Second,
		"reloadRuns": 3, "k8sapi": true, "reloadControl": 5 * time.Second, "startRuns": 3, "startPlugins": 10, "pullRuns": 3,
		"memoryN": 50000, "memoryRuns": 3, "memorySettle": 5 * time.Second, "memoryPlugins": 10,
		// Case 5's sides to run, space separated, each a side or
		// side/plugins ("native-stripped host/10"); empty: all of them.
		"memorySides":  "",
		"failoverRuns": 3, "failoverPlugins": 10,
		"peersN": 5000, "peersRuns": 3, "peersPlugins": 10, "peersSides": peerSides, "peersSlowRuns": 1,
		"restartObjects": 2000, "convergeN": 1000, "convergeRuns": 3, "convergeQPS": 50, "convergeBurst": 100,
		"copyN": 1000, "copyRuns": 3, "copyQPS": 50, "copyBurst": 100,
		// Case 11: plugin counts, the first the baseline the others are
		// compared with; updates at scaleRate per second.
		"scaleN": 50000, "scalePlugins": "10/50/100/200", "scaleUpdates": 3000, "scaleRate": 100,
		// More environment of every daemon the harness starts, space
		// separated (GOGC=200 GODEBUG=gctrace=1): a runtime setting tried
		// on the daemon alone, the native baseline keeping the defaults.
		"daemonEnv": "",
	}
}

// override applies "name=value,..." to p, parsing each value as the
// parameter's type.
func override(p map[string]any, set string) error {
	if set == "" {
		return nil
	}
	for _, kv := range strings.Split(set, ",") {
		k, v, ok := strings.Cut(kv, "=")
		old, known := p[k]
		if !ok || !known {
			return fmt.Errorf("-set: %q is not name=value with a known name", kv)
		}
		var err error
		switch old.(type) {
		case int:
			p[k], err = strconv.Atoi(v)
		case bool:
			p[k], err = strconv.ParseBool(v)
		case time.Duration:
			p[k], err = time.ParseDuration(v)
		case string:
			p[k] = v
		}
		if err != nil {
			return fmt.Errorf("-set %s: %w", kv, err)
		}
	}
	return nil
}

func finish(res *results, out string, smoke bool, root string) int {
	res.Took = time.Since(res.Began)
	// The raw results go to build/bench/results.json for the report at the
	// root (-render re-renders it), next to any other report file.
	path := strings.TrimSuffix(out, ".md") + ".json"
	if out == filepath.Join(root, "BENCHMARKS.md") {
		path = filepath.Join(root, "build", "bench", "results.json")
	}
	if b, err := json.MarshalIndent(res, "", "  "); err == nil {
		_ = os.WriteFile(path, b, 0o644)
	}
	return writeReport(res, out, smoke, root)
}

// writeReport prints the table and writes the report file: the machine,
// the date, the command, the table and, for a full run, bench/NOTES.md.
func writeReport(res *results, out string, smoke bool, root string) int {
	res.buildRows()
	table := res.table()
	fmt.Println("machine load:", loadSummary(res.Load))
	fmt.Println(table)
	var doc strings.Builder
	cmd := "make bench"
	if smoke {
		cmd = "make bench-smoke"
	}
	fmt.Fprintf(&doc, "# Benchmarks\n\n")
	if smoke {
		doc.WriteString("**Smoke run: every benchmark once, with tiny sizes. The figures mean nothing.**\n\n")
	}
	fmt.Fprintf(&doc, "- Machine: %s\n", res.Machine)
	fmt.Fprintf(&doc, "- Machine load: %s\n", loadSummary(res.Load))
	fmt.Fprintf(&doc, "- Date: %s (took %s)\n", res.Began.UTC().Format("2006-01-02 15:04 MST"), res.Took.Round(time.Second))
	fmt.Fprintf(&doc, "- Command: `%s` (`go run ./bench/cmd/bench`); raw figures in build/bench/ (results.json, work/gobench.txt)\n", cmd)
	fmt.Fprintf(&doc, "- In-process figures are medians of %v `go test -bench` runs (-benchtime %v); end-to-end figures medians of %v runs per side, the sides alternating. Ratios are informer-host over the baseline of the same run.\n",
		res.Params["count"], res.Params["benchtime"], res.Params["throughputRuns"])
	if len(res.Errors) > 0 {
		doc.WriteString("\n**Errors in this run:**\n\n")
		for _, e := range res.Errors {
			fmt.Fprintf(&doc, "- %s\n", strings.ReplaceAll(e, "\n", " "))
		}
	}
	doc.WriteString("\n")
	doc.WriteString(table)
	if !smoke {
		if notes, err := os.ReadFile(filepath.Join(root, "bench", "NOTES.md")); err == nil {
			doc.WriteString("\n")
			doc.Write(notes)
		}
	}
	if err := os.WriteFile(out, []byte(doc.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", out)
	if len(res.Errors) > 0 {
		return 1
	}
	return 0
}
