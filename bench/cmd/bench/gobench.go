package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// goBench is one `go test -bench` invocation.
type goBench struct {
	pkg, pattern string
}

// The in-process benchmarks. Every figure in the table is the median of
// -count runs of its benchmark; the benchmarks compared with one another
// (a plugin and its native counterpart, 1 and 10 plugins) run in the same
// invocation, one after the other.
var goBenches = []goBench{
	{"./internal/filter", "^BenchmarkDecide$"},
	{"./host/internal/engine", "^Benchmark(Guest|Batch|Encode|State|MetricAdd|InstanceMemory|LoadWarm|LoadCold)$"},
	{"./host", "^Benchmark(Dispatch|Fanout|CacheRead|Write|HTTPUpstream|View)$"},
}

// benchResults maps a benchmark name (without the -GOMAXPROCS suffix) to
// the values of each metric over the runs.
type benchResults map[string]map[string][]float64

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+(\d+)\s+(.*)$`)

func parseBench(r io.Reader, into benchResults, echo io.Writer) error {
	s := bufio.NewScanner(r)
	for s.Scan() {
		line := s.Text()
		if echo != nil {
			fmt.Fprintln(echo, line)
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := strings.Fields(m[4])
		if into[m[1]] == nil {
			into[m[1]] = map[string][]float64{}
		}
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			into[m[1]][f[i+1]] = append(into[m[1]][f[i+1]], v)
		}
	}
	return s.Err()
}

// runGoBenches runs the benchmarks and returns their results. out receives
// go test's output as it comes (and is saved next to the report).
func runGoBenches(root string, benchtime string, count int, out io.Writer) (benchResults, error) {
	res := benchResults{}
	for _, b := range goBenches {
		args := []string{"test", "-run", "^$", "-bench", b.pattern, "-benchtime", benchtime,
			"-count", strconv.Itoa(count), "-timeout", "60m", b.pkg}
		fmt.Fprintf(out, "$ go %s\n", strings.Join(args, " "))
		cmd := exec.Command(envOr("GO", "go"), args...)
		cmd.Dir = root
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		perr := parseBench(stdout, res, out)
		if err := cmd.Wait(); err != nil {
			return res, fmt.Errorf("go test -bench %s %s: %w", b.pattern, b.pkg, err)
		}
		if perr != nil {
			return res, perr
		}
	}
	return res, nil
}

// get returns the median of metric over the runs of benchmark name, and
// whether there was any.
func (r benchResults) get(name, metric string) (float64, bool) {
	v := r[name][metric]
	if len(v) == 0 {
		return 0, false
	}
	return median(v), true
}
