package reconcile

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/internal/filter"
)

// keysExpr is a compiled map or referencedBy expression: CEL over one
// object, named object, returning a key or a list of keys.
type keysExpr struct {
	field string // "watches[2].map", for messages
	text  string
	prg   cel.Program
}

// newKeysEnv declares what map and referencedBy expressions see: the
// object, untyped, as binding filters see it (package filter), so an
// expression means the same in both places.
func newKeysEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("object", cel.DynType),
		cel.OptionalTypes(),
		cel.CrossTypeNumericComparisons(true),
	)
}

// compileKeys compiles expr, refusing what cannot return keys and what
// the static cost estimate says may run away, with binding filters'
// limits.
func compileKeys(env *cel.Env, field, expr string) (*keysExpr, error) {
	checked, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%s: %w", field, iss.Err())
	}
	t := checked.OutputType()
	switch {
	case t.IsExactType(cel.StringType), t.IsExactType(cel.DynType),
		t.IsExactType(cel.ListType(cel.StringType)), t.IsExactType(cel.ListType(cel.DynType)):
	default:
		return nil, fmt.Errorf("%s: the expression must return a key (string) or a list of keys, \"namespace/name\" or \"name\", but its type is %s",
			field, cel.FormatCELType(t))
	}
	est, err := env.EstimateCost(checked, sizeEstimator{})
	if err != nil {
		return nil, fmt.Errorf("%s: estimating the cost of the expression: %w", field, err)
	}
	if est.Max > filter.DefaultEstimatedCostLimit {
		return nil, fmt.Errorf("%s: the expression's estimated worst-case cost, %d, exceeds the limit of %d "+
			"(assuming lists, maps and strings in objects of up to %d entries); avoid nested comprehensions over object fields",
			field, est.Max, filter.DefaultEstimatedCostLimit, filter.DefaultAssumedMaxSize)
	}
	prg, err := env.Program(checked, cel.CostLimit(filter.DefaultCostLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, fmt.Errorf("%s: building the program: %w", field, err)
	}
	return &keysExpr{field: field, text: expr, prg: prg}, nil
}

// sizeEstimator sizes every value of an object as binding filters do
// (filter.DefaultAssumedMaxSize entries).
type sizeEstimator struct{}

func (sizeEstimator) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: filter.DefaultAssumedMaxSize}
}

func (sizeEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// eval returns the keys e gives for obj, as written ("ns/name" or
// "name"); empty strings are left out.
func (e *keysExpr) eval(obj *unstructured.Unstructured) ([]string, error) {
	out, _, err := e.prg.Eval(map[string]any{"object": obj.Object})
	if err != nil {
		hint := ""
		if strings.HasPrefix(err.Error(), "no such key") {
			hint = " (guard fields that may be absent with has(), or use optional selection: object.?spec.?owner.orValue(\"\"))"
		}
		return nil, fmt.Errorf("%s %s on %s: %w%s", e.field, quote(e.text), objectKey(obj), err, hint)
	}
	switch v := out.(type) {
	case types.String:
		if v == "" {
			return nil, nil
		}
		return []string{string(v)}, nil
	case traits.Lister:
		var keys []string
		for it := v.Iterator(); it.HasNext() == types.True; {
			el := it.Next()
			s, ok := el.(types.String)
			if !ok {
				return keys, fmt.Errorf("%s %s on %s: the list holds a %s, not a key (string)", e.field, quote(e.text), objectKey(obj), typeName(el))
			}
			if s != "" {
				keys = append(keys, string(s))
			}
		}
		return keys, nil
	case types.Null:
		return nil, nil
	}
	return nil, fmt.Errorf("%s %s on %s: returned a %s, not a key (string) or a list of keys", e.field, quote(e.text), objectKey(obj), typeName(out))
}

func typeName(v ref.Val) string { return v.Type().TypeName() }

// quote returns an expression for messages, shortened if long.
func quote(s string) string {
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return fmt.Sprintf("%q", s)
}

func objectKey(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}
