package filter

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
)

// Names of the variables an expression sees.
const (
	varType      = "type"
	varObject    = "object"
	varOldObject = "oldObject"
	varResource  = "resource"
)

// Cache compiles Specs into Filters, sharing what identical expressions
// have in common: one compiled program per distinct expression text, and
// one memo of evaluation results, so that the filters of several plugins
// bound to the same resource with the same expression evaluate it once per
// object rather than once per plugin.
//
// A Cache is safe for concurrent use. Keep one for the life of the process
// (or at least across config reloads): programs no Filter uses any more are
// released by the garbage collector, and an expression that survives a
// reload keeps its program and its memoized results.
type Cache struct {
	opts Options
	env  *cel.Env
	memo *memo

	mu       sync.Mutex
	programs map[string]weak.Pointer[program]
	nextID   atomic.Uint64
}

// NewCache returns an empty Cache. It fails only if the CEL environment
// cannot be built, which would be a bug in this package.
func NewCache(opts Options) (*Cache, error) {
	opts = opts.withDefaults()
	env, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("filter: building the CEL environment: %w", err)
	}
	return &Cache{
		opts:     opts,
		env:      env,
		memo:     newMemo(opts.MemoSize),
		programs: make(map[string]weak.Pointer[program]),
	}, nil
}

// Compile compiles spec into a Filter of its own Cache. Filters that should
// share evaluations must come from one Cache; use Compile for one-offs.
func Compile(spec Spec, opts Options) (*Filter, error) {
	c, err := NewCache(opts)
	if err != nil {
		return nil, err
	}
	return c.Compile(spec)
}

// newEnv declares the variables expressions see. object and oldObject are
// dyn because objects are untyped (any kind, any CRD): field access is
// checked when the expression runs, not when it compiles. resource and type
// have fixed shapes, so mistakes there are caught at compile time.
func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(varType, cel.StringType),
		cel.Variable(varObject, cel.DynType),
		cel.Variable(varOldObject, cel.DynType),
		cel.Variable(varResource, cel.MapType(cel.StringType, cel.StringType)),
		// object.?status.?phase.orValue("") reads a field that may be
		// absent without an error, which has() alone does not make easy
		// for nested fields.
		cel.OptionalTypes(),
		// Unstructured numbers are int64 or float64 depending on how they
		// were written; let `object.spec.replicas > 2.5` work either way,
		// as Kubernetes CEL does.
		cel.CrossTypeNumericComparisons(true),
	)
}

// Compile validates spec and returns its Filter. Problems are returned as
// Errors, one per offending YAML field in Spec's field order, with CEL's own
// message for the expression; the caller adds file and line.
func (c *Cache) Compile(spec Spec) (*Filter, error) {
	var probs Errors
	f := &Filter{spec: spec}
	f.spec.Changed = append([]string(nil), spec.Changed...)

	if spec.Expression != "" {
		prog, err := c.program(spec.Expression)
		if err != nil {
			probs = append(probs, Problem{Field: "filter", Message: err.Error()})
		}
		f.prog = prog
	}

	for i, s := range spec.Changed {
		p, err := parsePath(s)
		if err != nil {
			probs = append(probs, Problem{Field: "changed[" + strconv.Itoa(i) + "]", Message: err.Error()})
			continue
		}
		f.changed = append(f.changed, p)
	}

	switch spec.OnError {
	case "", OnErrorOpen:
		f.spec.OnError = OnErrorOpen
	case OnErrorClosed:
		f.closed = true
	default:
		probs = append(probs, Problem{Field: "onError", Message: fmt.Sprintf("must be %q or %q, not %q", OnErrorOpen, OnErrorClosed, spec.OnError)})
	}

	if len(probs) > 0 {
		return nil, probs
	}
	f.memo = c.memo
	return f, nil
}

// program returns the compiled program for expr, compiling it if no live
// Filter holds one.
func (c *Cache) program(expr string) (*program, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if wp, ok := c.programs[expr]; ok {
		if p := wp.Value(); p != nil {
			return p, nil
		}
	}
	p, err := c.compileProgram(expr)
	if err != nil {
		return nil, err
	}
	wp := weak.Make(p)
	c.programs[expr] = wp
	// Forget the entry once no Filter uses the program, unless a newer
	// program for the same text has replaced it meanwhile.
	runtime.AddCleanup(p, func(expr string) {
		c.mu.Lock()
		if c.programs[expr] == wp {
			delete(c.programs, expr)
		}
		c.mu.Unlock()
	}, expr)
	return p, nil
}

// program is one compiled expression, shared by every Filter of a Cache
// whose expression has this text.
type program struct {
	// id identifies the program in memo keys. A number rather than the
	// pointer so that memo entries do not keep dropped programs alive.
	id   uint64
	text string
	prg  cel.Program
	// statePredicate is set when the expression reads only object and
	// resource: its verdict is a property of one object state, which is
	// what lets Decide compute the old state's verdict and turn updates
	// into synthetic adds and deletes, and lets the memo reuse a verdict
	// for every event that carries the same object.
	statePredicate bool
	usesResource   bool
	// estimate is the static cost estimate, kept for messages and tests.
	estimate checker.CostEstimate
	// tracked says whether evaluations count their cost and stop at the
	// runtime limit; see compileProgram.
	tracked bool
	// activations recycles activations: Eval takes its input as an
	// interface, so a fresh one would be a heap allocation per evaluation.
	activations sync.Pool
	// evals counts evaluations; tests use it to check that shared
	// filters evaluate once.
	evals atomic.Uint64
}

func (c *Cache) compileProgram(expr string) (*program, error) {
	// CEL's messages locate problems as <input>:line:column within the
	// expression, as in Kubernetes; the caller adds where the expression is.
	checked, iss := c.env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	// A dyn result (object.spec.paused) is refused too: it would be
	// checked only at run time, on every event, and fail on non-bools.
	// This is also what Kubernetes does for matchConditions.
	if t := checked.OutputType(); !t.IsExactType(cel.BoolType) {
		hint := ""
		if t.IsExactType(cel.DynType) {
			hint = "; compare explicitly, e.g. `object.spec.paused == true`"
		}
		return nil, fmt.Errorf("the expression must evaluate to bool, but its type is %s%s", cel.FormatCELType(t), hint)
	}
	est, err := c.env.EstimateCost(checked, sizeEstimator{size: c.opts.AssumedMaxSize})
	if err != nil {
		return nil, fmt.Errorf("estimating the cost of the expression: %w", err)
	}
	if est.Max > c.opts.EstimatedCostLimit {
		return nil, fmt.Errorf("the expression's estimated worst-case cost, %s, exceeds the limit of %d by a factor of %s "+
			"(assuming lists, maps and strings in objects of up to %d entries); "+
			"nested comprehensions (all, exists, exists_one, filter, map) over object fields multiply their costs: "+
			"avoid nesting them, or iterate over a smaller field",
			formatCost(est.Max), c.opts.EstimatedCostLimit, factor(est.Max, c.opts.EstimatedCostLimit), c.opts.AssumedMaxSize)
	}
	// Cost tracking observes every intermediate value, which makes a
	// simple field comparison three times slower and allocate per field
	// it walks. It is pointless for expressions whose worst case does not
	// depend on the object at all (no comprehension, no comparison of two
	// object values, ...) and is within the runtime limit: they can never
	// reach it. The estimator tells them apart: costs only grow with
	// sizes, so an estimate that is the same for tiny and for absurdly
	// large values holds for every object.
	tiny, err := c.env.EstimateCost(checked, sizeEstimator{size: 1})
	if err != nil {
		return nil, fmt.Errorf("estimating the cost of the expression: %w", err)
	}
	huge, err := c.env.EstimateCost(checked, sizeEstimator{size: 1 << 40})
	if err != nil {
		return nil, fmt.Errorf("estimating the cost of the expression: %w", err)
	}
	tracked := tiny.Max != huge.Max || huge.Max > c.opts.CostLimit
	progOpts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	if tracked {
		progOpts = append(progOpts, cel.CostLimit(c.opts.CostLimit))
	}
	prg, err := c.env.Program(checked, progOpts...)
	if err != nil {
		return nil, fmt.Errorf("building the program: %w", err)
	}
	p := &program{
		id:       c.nextID.Add(1),
		text:     expr,
		prg:      prg,
		estimate: est,
		tracked:  tracked,
	}
	refs := referencedVars(checked.NativeRep())
	p.statePredicate = !refs[varType] && !refs[varOldObject]
	p.usesResource = refs[varResource]
	return p, nil
}

// referencedVars returns the names of the declared variables expr uses.
// The checker records a reference for every identifier it resolved to a
// variable (comprehension variables are not recorded).
func referencedVars(a *ast.AST) map[string]bool {
	refs := make(map[string]bool, 4)
	for _, r := range a.ReferenceMap() {
		switch r.Name {
		case varType, varObject, varOldObject, varResource:
			refs[r.Name] = true
		}
	}
	return refs
}

// sizeEstimator gives the checker a size for values it cannot size from
// the expression itself. Everything under object, oldObject and resource is
// dyn, so it answers with the same assumed maximum for all of them, and for
// values computed from them.
type sizeEstimator struct{ size uint64 }

func (e sizeEstimator) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: e.size}
}

func (sizeEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil // CEL's own estimates for the standard library
}

func formatCost(c uint64) string {
	if c >= 1e9 {
		return strconv.FormatFloat(float64(c), 'g', 3, 64)
	}
	return strconv.FormatUint(c, 10)
}

func factor(cost, limit uint64) string {
	return strconv.FormatFloat(float64(cost)/float64(limit), 'g', 3, 64)
}
