package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/informer-host/informer-host/host/replay"
)

// replayCommand runs one plugin offline on a recorded event stream
// (abi/REPLAY.md) and exits 1 when the plugin failed in a way --allow does
// not accept, so it works as a test in a plugin's own CI.
func replayCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	plugin := fs.String("plugin", "", "the plugin `file` (.wasm)")
	events := fs.String("events", "", "the recorded events `file` (events.jsonl, see abi/REPLAY.md)")
	cfgFile := fs.String("config", "", "the plugin's configuration `file` (JSON, handed to ih_init)")
	stateFile := fs.String("state", "", "seed the plugin's state from a JSON `file` {\"key\": \"value\", ...}")
	stubsFile := fs.String("stubs", "", "answer writes, events and HTTP calls from a stub `file` (abi/REPLAY.md)")
	asJSON := fs.Bool("json", false, "print one JSON report instead of text")
	allow := fs.String("allow", "", "comma-separated outcomes that do not fail the replay: drop, error, retry-exhausted, failure (traps, exits, timeouts), calls (with --compare: writes, Events and HTTP calls that differ from the --stubs file)")
	compare := fs.Bool("compare", false, "fail when a result differs from the one the recording holds (a reconcile's children set, status and requeue-after too), or the plugin's writes, Events, HTTP and controller calls from the --stubs file's (a stub no call used, a call no stub was there for)")
	retries := fs.Int("max-retries", 3, "deliveries again of an event answered retry once the recording has no cache line left to wait for")
	timeout := fs.Duration("call-timeout", 10*time.Second, "deadline of each call into the plugin")
	realClock := fs.Bool("real-clock", false, "give the plugin the system clocks and random source (not reproducible)")
	seed := fs.Uint64("seed", 0, "seed of the plugin's random source")
	start := fs.String("clock", "", "the plugin's wall clock at its first reading (RFC 3339; default 2026-01-01T00:00:00Z)")
	quiet := fs.Bool("quiet", false, "text output: only failures and the summary")
	cacheDir := fs.String("cache-dir", defaultCacheDir(), "keep compiled plugins here across replays, as run does (\"\": compile every time)")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *plugin == "" || *events == "" {
		fmt.Fprintln(stderr, "informer-host replay: --plugin and --events are required")
		return 2
	}
	o := replay.Options{Plugin: *plugin, MaxRetries: *retries, CallTimeout: *timeout, RealClock: *realClock, Seed: *seed, CacheDir: *cacheDir}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "informer-host replay: %v\n", err)
		return 1
	}
	var err error
	if o.Events, err = replay.ReadFile(*events); err != nil {
		return fail(err)
	}
	if *cfgFile != "" {
		if o.Config, err = os.ReadFile(*cfgFile); err != nil {
			return fail(err)
		}
	}
	if *stateFile != "" {
		b, err := os.ReadFile(*stateFile)
		if err != nil {
			return fail(err)
		}
		if err := json.Unmarshal(b, &o.State); err != nil {
			return fail(fmt.Errorf("%s: want a JSON object of strings: %v", *stateFile, err))
		}
	}
	if *stubsFile != "" {
		if o.Stubs, err = replay.ReadStubs(*stubsFile); err != nil {
			return fail(err)
		}
	}
	if *start != "" {
		if o.Start, err = time.Parse(time.RFC3339Nano, *start); err != nil {
			return fail(fmt.Errorf("--clock: %v", err))
		}
	}
	allowed := map[string]bool{}
	for _, a := range strings.Split(*allow, ",") {
		switch a = strings.TrimSpace(a); a {
		case "":
		case "drop", "error", "retry-exhausted", "failure", "calls":
			allowed[a] = true
		default:
			fmt.Fprintf(stderr, "informer-host replay: --allow: unknown outcome %q (want drop, error, retry-exhausted, failure or calls)\n", a)
			return 2
		}
	}
	rep, runErr := replay.Run(ctx, o)
	if rep == nil {
		return fail(runErr)
	}
	problems := verdict(rep, allowed, *compare)
	if runErr != nil {
		problems = append(problems, runErr.Error())
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			*replay.Report
			Problems []string `json:"problems"`
		}{rep, problems})
	} else {
		printReport(stdout, rep, *quiet)
		for _, p := range problems {
			fmt.Fprintln(stdout, "FAIL:", p)
		}
		if len(problems) == 0 {
			fmt.Fprintln(stdout, "PASS")
		}
	}
	if len(problems) > 0 {
		return 1
	}
	return 0
}

// defaultCacheDir is run's default compilation cache, "" without a user
// cache directory.
func defaultCacheDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(base, "informer-host", "wazero")
}

// verdict lists what fails the replay.
func verdict(rep *replay.Report, allowed map[string]bool, compare bool) []string {
	var out []string
	for _, s := range rep.Steps {
		what := fmt.Sprintf("step %d (%s", s.Seq, s.Call)
		if s.Line > 0 {
			what += fmt.Sprintf(", events line %d, %s", s.Line, s.Event)
		}
		what += ")"
		switch {
		case s.Failure != nil && !allowed["failure"]:
			out = append(out, fmt.Sprintf("%s: %s: %s (--allow failure to accept)", what, s.Failure.Kind, s.Failure.Error))
		case (s.Result == "drop" || s.Result == "error" || s.Result == "retry-exhausted") && !allowed[s.Result]:
			out = append(out, fmt.Sprintf("%s: the plugin answered %s %q (--allow %s to accept)", what, s.Result, s.Message, s.Result))
		}
		if compare && s.Recorded != "" && s.Recorded != s.Result {
			out = append(out, fmt.Sprintf("%s: result %s, recorded %s", what, s.Result, s.Recorded))
		}
		if compare {
			// A reconcile's children set, status and requeue-after are its
			// answer as much as its result is.
			for _, d := range s.Differs {
				out = append(out, fmt.Sprintf("%s: %s", what, d))
			}
		}
		if compare && !allowed["calls"] {
			for _, c := range s.Calls {
				if c.Extra == replay.ExtraRepeated && s.Attempt > 1 {
					// A later attempt of a retried delivery: the replay
					// retries on its schedule, the live run on its backoff.
					continue
				}
				if why := extraWhy[c.Extra]; why != "" {
					out = append(out, fmt.Sprintf("%s: %s: %s (--allow calls to accept)", what, replay.Describe(c.Function, c.Request), why))
				}
			}
		}
	}
	if compare && !allowed["calls"] {
		// The stub file of a recording holds the calls the live run made,
		// in order: one the replay did not make is a divergence as real
		// as a different result (a write the live run made, whose result
		// the replay's cache already held, say).
		for _, u := range rep.UnusedStubs {
			if u.Retry {
				continue // a later attempt the replay's retries did not reach
			}
			out = append(out, fmt.Sprintf("stubs[%d] (%s) was not used: the recording made this call, the replay did not (--allow calls to accept)",
				u.Index, replay.Describe(u.Function, u.Request)))
		}
	}
	return out
}

// extraWhy says, for --compare, why a call (replay.Call.Extra) is not one
// the stub file holds.
var extraWhy = map[string]string{
	replay.ExtraUnstubbed: "no stub answers it: the recording made no such call",
	replay.ExtraRepeated:  "answered again by a stub this request used already: the recording made it fewer times",
}

func printReport(w io.Writer, rep *replay.Report, quiet bool) {
	for _, s := range rep.Steps {
		if quiet && s.Failure == nil && s.Result == "ok" {
			continue
		}
		head := fmt.Sprintf("[%d] %s", s.Seq, s.Call)
		if s.Event != "" {
			head += " " + s.Event
		}
		if s.Attempt > 1 {
			head += fmt.Sprintf(" (attempt %d)", s.Attempt)
		}
		head += ": " + s.Result
		if s.Message != "" {
			head += fmt.Sprintf(" %q", s.Message)
		}
		fmt.Fprintln(w, head)
		if !quiet {
			for _, l := range s.Logs {
				fmt.Fprintf(w, "    log %s %s", l.Level, l.Message)
				if l.Attrs != "" {
					fmt.Fprintf(w, " %s", l.Attrs)
				}
				fmt.Fprintln(w)
			}
			for _, c := range s.Calls {
				fmt.Fprintf(w, "    call %s %s -> %d", c.Function, c.Request, c.Code)
				if len(c.Response) > 0 {
					fmt.Fprintf(w, " %s", c.Response)
				}
				if c.Message != "" {
					fmt.Fprintf(w, " %q", c.Message)
				}
				fmt.Fprintln(w)
			}
			if s.RequeueAfterMillis > 0 {
				fmt.Fprintf(w, "    requeue-after %s\n", time.Duration(s.RequeueAfterMillis)*time.Millisecond)
			}
		}
		for _, d := range s.Differs {
			fmt.Fprintf(w, "    differs: %s\n", d)
		}
		if f := s.Failure; f != nil {
			fmt.Fprintf(w, "    %s in %s: %s\n", f.Kind, f.Phase, f.Error)
			if f.Stack != "" {
				fmt.Fprintf(w, "    wasm stack:\n      %s\n", strings.ReplaceAll(f.Stack, "\n", "\n      "))
			}
			if f.Output != "" {
				fmt.Fprintf(w, "    output:\n      %s\n", strings.ReplaceAll(strings.TrimRight(f.Output, "\n"), "\n", "\n      "))
			}
		}
	}
	if len(rep.State) > 0 && !quiet {
		fmt.Fprintln(w, "state:")
		keys := make([]string, 0, len(rep.State))
		for k := range rep.State {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %s = %s\n", k, rep.State[k])
		}
	}
	if rep.Metrics != "" && !quiet {
		fmt.Fprintln(w, "metrics:")
		for _, l := range strings.Split(strings.TrimRight(rep.Metrics, "\n"), "\n") {
			if !strings.HasPrefix(l, "#") {
				fmt.Fprintln(w, "  "+l)
			}
		}
	}
	if len(rep.MissingStubs) > 0 {
		// Once, whatever the retries: each distinct request no stub
		// answered, as a stub file to merge into --stubs.
		fmt.Fprintln(w, "stubs to add (no stub answered these calls; put them in the --stubs file, with the answer you want):")
		var b strings.Builder
		_ = replay.WriteStubs(&b, rep.MissingStubs)
		fmt.Fprintln(w, "  "+strings.ReplaceAll(strings.TrimRight(b.String(), "\n"), "\n", "\n  "))
	}
	if len(rep.UnusedStubs) > 0 {
		// Said even without --compare: with a recording's stub file, each
		// is a call the live run made and this replay did not.
		fmt.Fprintln(w, "unused stubs (no call used them: calls the recording made that the replay did not):")
		for _, u := range rep.UnusedStubs {
			b, _ := json.MarshalIndent(u.Stub, "    ", "  ")
			fmt.Fprintf(w, "  stubs[%d] %s:\n    %s\n", u.Index, replay.Describe(u.Function, u.Request), b)
		}
	}
	c := rep.Counts
	fmt.Fprintf(w, "%s: %d events: %d ok, %d retries, %d retry-exhausted, %d dropped, %d errors, %d failures",
		rep.Plugin, c.Events, c.OK, c.Retries, c.RetryExhausted, c.Dropped, c.Errors, c.Failures)
	if c.UnstubbedCalls+c.RepeatedCalls+c.UnusedStubs > 0 {
		fmt.Fprintf(w, "; calls apart from the stubs: %d unstubbed, %d repeated, %d stubs unused", c.UnstubbedCalls, c.RepeatedCalls, c.UnusedStubs)
	}
	fmt.Fprintln(w)
}
