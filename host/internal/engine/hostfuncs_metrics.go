package engine

import (
	"context"

	"github.com/tetratelabs/wazero/api"

	"github.com/informer-host/informer-host/abi"
)

// MetricSet is what the metric_* host functions call: one instance's view
// of its plugin's metrics (pluginmetrics.View implements it). The engine
// checks pointers and the grant; the set validates everything else and
// answers with ABI codes. Its methods are called from the instance's
// calls, one at a time. decl and labels alias guest memory and are valid
// only during the call.
type MetricSet interface {
	// Declare returns a metric id >= 0 or ERR_INVALID / ERR_EXISTS /
	// ERR_QUOTA (past the plugin's byte budget).
	Declare(kind int32, decl []byte) int32
	// Add, Set and Observe return 0, abi.MetricDropped, ERR_INVALID, or
	// ERR_QUOTA for a new series past the plugin's byte budget.
	Add(id int32, v float64, labels []byte) int32
	Set(id int32, v float64, labels []byte) int32
	Observe(id int32, v float64, labels []byte) int32
}

// capMetrics is the capability name the metric_* functions are granted by.
const capMetrics = "metrics"

// metricSet returns the granted set, or nil after reporting the denial.
func (st *callState) metricSet(fn string) MetricSet {
	if st == nil {
		return nil
	}
	if st.metrics == nil {
		if st.onDenied != nil {
			st.onDenied(capMetrics, fn)
		}
		return nil
	}
	return st.metrics
}

// metric_declare(kind, ptr, len i32) -> i32
func metricDeclare(ctx context.Context, mod api.Module, stack []uint64) {
	kind, ptr, n := i32(stack[0]), uint32(stack[1]), i32(stack[2])
	decl, ok := region(mod, ptr, n)
	if !ok {
		setI32(stack, abi.ErrBounds)
		return
	}
	m := stateOf(ctx).metricSet(abi.ImportMetricDeclare)
	if m == nil {
		setI32(stack, abi.ErrDenied)
		return
	}
	setI32(stack, m.Declare(kind, decl))
}

// metricUpdate is metric_add, metric_set and metric_observe:
// (id i32, value f64, labels_ptr, labels_len i32) -> i32.
func metricUpdate(name string, apply func(m MetricSet, id int32, v float64, labels []byte) int32) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		id, v, ptr, n := i32(stack[0]), api.DecodeF64(stack[1]), uint32(stack[2]), i32(stack[3])
		labels, ok := region(mod, ptr, n)
		if !ok {
			setI32(stack, abi.ErrBounds)
			return
		}
		m := stateOf(ctx).metricSet(name)
		if m == nil {
			setI32(stack, abi.ErrDenied)
			return
		}
		setI32(stack, apply(m, id, v, labels))
	}
}

// metricFuncs are the metric_* host functions, for instantiateHostModule.
func metricFuncs() map[string]api.GoModuleFunc {
	return map[string]api.GoModuleFunc{
		abi.ImportMetricDeclare: metricDeclare,
		abi.ImportMetricAdd:     metricUpdate(abi.ImportMetricAdd, MetricSet.Add),
		abi.ImportMetricSet:     metricUpdate(abi.ImportMetricSet, MetricSet.Set),
		abi.ImportMetricObserve: metricUpdate(abi.ImportMetricObserve, MetricSet.Observe),
	}
}
