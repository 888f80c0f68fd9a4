package filter

import (
	"strings"
)

// OnError values: what Decide does with an event whose filter evaluation
// failed.
const (
	// OnErrorOpen delivers the event. It is the default because a filter
	// that breaks on objects its author did not foresee (a field that is
	// sometimes absent) should cost CPU, not silently lose events.
	OnErrorOpen = "open"
	// OnErrorClosed drops the event.
	OnErrorClosed = "closed"
)

// Spec is one binding's filtering configuration, as written in the YAML.
// The zero Spec delivers every event except resyncs.
type Spec struct {
	// Expression is the binding's `filter`: a CEL expression over type,
	// object, oldObject and resource that must evaluate to bool. Empty
	// means every object matches.
	Expression string
	// Changed is the binding's `changed`: field paths relative to the
	// object root ("status.phase", `metadata.labels["app.kubernetes.io/name"]`,
	// "spec.containers[0].image"). When non-empty, an update is delivered
	// only if at least one of them differs between the old and new object.
	Changed []string
	// Resyncs is the binding's `resyncs`: deliver updates whose old and new
	// objects have the same resourceVersion (informer resyncs and relists).
	Resyncs bool
	// OnError is the binding's `onError`: OnErrorOpen (also for "") or
	// OnErrorClosed.
	OnError string
	// GenerationChanged is the binding's `generationChanged`: an update
	// is delivered only if it changed metadata.generation (the apiserver
	// bumps it on a change of spec, not of status or metadata) or set
	// metadata.deletionTimestamp, which starts a deletion without
	// changing the generation of most resources.
	GenerationChanged bool
}

// Defaults for Options fields left zero.
const (
	// DefaultCostLimit is the runtime cost limit of one evaluation:
	// about 0.1 s of CPU on the objects filters see. Kubernetes' limit for
	// CEL validation rules and admission policies
	// (k8s.io/apiserver/pkg/apis/cel.PerCallLimit) is ten times this and
	// described as roughly 0.1 s there, but a cost unit over unstructured
	// objects costs more: a nested loop over a 1,000-key ConfigMap was
	// stopped after 0.09 s at 150,000 units and 0.7-1.2 s at 1,000,000
	// (BenchmarkRunawayStopped, 2 shared cores). A
	// filter runs on the informer's delivery path, so the limit is set by
	// time. Realistic filters cost tens of units, a loop over a 1,000-entry
	// field thousands; the limit only stops runaway comprehensions.
	DefaultCostLimit = 150_000
	// DefaultEstimatedCostLimit is the static cost estimate above which
	// Compile refuses an expression. It is Kubernetes' limit for CRD
	// validation rules (apiextensions StaticEstimatedCostLimit): ten times
	// the runtime limit, because the estimate is a worst case over objects
	// that are rarely that large, while the runtime limit is measured on
	// the real object.
	DefaultEstimatedCostLimit = 10_000_000
	// DefaultAssumedMaxSize is the size static estimation assumes for any
	// list, map or string in an object, see Options.AssumedMaxSize.
	DefaultAssumedMaxSize = 1024
	// DefaultMemoSize is the default number of slots of a Cache's
	// evaluation memo, see Options.MemoSize.
	DefaultMemoSize = 4096
)

// Options tunes compilation and evaluation. The zero value uses the
// defaults above; they are meant to be left alone.
type Options struct {
	// CostLimit stops an evaluation whose CEL runtime cost exceeds it; the
	// evaluation fails and the binding's onError applies.
	CostLimit uint64
	// EstimatedCostLimit refuses, at compile time, an expression whose
	// worst-case cost estimate exceeds it.
	EstimatedCostLimit uint64
	// AssumedMaxSize is the number of entries (lists, maps) or characters
	// (strings) the static estimate assumes for a value of the object whose
	// size it cannot know, which is every value: objects are untyped.
	//
	// Why not the bound the apiserver actually enforces (an object is at
	// most ~1.5 MiB, the etcd request limit, so a list may hold ~750k
	// entries): with it every comparison of two strings from an object
	// would be estimated at 75k units and any comprehension whose body
	// does one would be refused, while the filters people write iterate
	// over a pod's containers or a service's ports. The estimate is there
	// to refuse expressions whose cost grows polynomially with the data
	// (comprehensions nested two or three deep); the runtime limit is what
	// bounds any single evaluation, whatever the object's size.
	AssumedMaxSize uint64
	// MemoSize is the number of slots of the evaluation memo a Cache
	// shares between its filters (rounded up to a power of two). Results
	// are remembered per object, so a listener lagging more than about
	// this many events behind another one re-evaluates instead of reusing
	// their results.
	MemoSize int
}

func (o Options) withDefaults() Options {
	if o.CostLimit == 0 {
		o.CostLimit = DefaultCostLimit
	}
	if o.EstimatedCostLimit == 0 {
		o.EstimatedCostLimit = DefaultEstimatedCostLimit
	}
	if o.AssumedMaxSize == 0 {
		o.AssumedMaxSize = DefaultAssumedMaxSize
	}
	if o.MemoSize <= 0 {
		o.MemoSize = DefaultMemoSize
	}
	return o
}

// Problem is one thing wrong with a Spec.
type Problem struct {
	// Field is the YAML key of the offending value: "filter",
	// "changed[2]" or "onError".
	Field string
	// Message says what is wrong. For "filter" it is CEL's own report,
	// which may span several lines (message, source line, caret).
	Message string
}

func (p Problem) String() string { return p.Field + ": " + p.Message }

// Errors is every problem Compile found in a Spec. Compile returns it as
// its error, so callers that want to attach file:line per field use
// errors.As.
type Errors []Problem

func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, p := range e {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}
