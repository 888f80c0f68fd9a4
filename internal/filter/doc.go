// Package filter decides, natively on the host, which informer events a
// plugin binding receives, so that events a plugin does not want never
// enter its queue and never wake its WebAssembly instance.
//
// A binding's filtering is described by a Spec, read from its YAML:
//
//	filter: 'object.metadata.labels["tier"] == "web"'   # CEL, must be bool
//	changed: [status.phase, spec.replicas]              # updates must change one of these
//	resyncs: false                                      # drop no-op updates (the default)
//	generationChanged: true                             # updates must change metadata.generation
//	onError: open                                       # deliver when evaluation fails (the default)
//
// # Usage
//
// Compile every binding's Spec when the config is loaded, through one Cache
// for the whole process, and call Decide from each plugin's listener before
// queueing:
//
//	cache, err := filter.NewCache(filter.Options{})
//	f, err := cache.Compile(filter.Spec{Expression: b.Filter, Changed: b.Changed, Resyncs: b.Resyncs, OnError: b.OnError})
//	var probs filter.Errors
//	if errors.As(err, &probs) { ... } // one Problem per YAML field: "filter", "changed[2]", "onError"
//	...
//	d := f.Decide(ev) // in the plugin's listener, for every event
//	if d.Err != nil {
//		if ok, suppressed := limiter.Allow(bindingName); ok { log(d.Err, suppressed) }
//	}
//	if d.Deliver {
//		queue.Push(d.Event) // ev itself, or a synthetic add or delete
//	}
//
// # Expressions
//
// The expression is CEL (https://cel.dev) over these variables:
//
//	type       string   "add", "update" or "delete"
//	object     dyn      the object (new state for updates, last state for deletes)
//	oldObject  dyn      the previous state for updates; null otherwise
//	resource   map      name (as in config.yaml), group, version, resource, kind
//
// Objects are untyped, so field access is checked when the expression runs.
// Selecting a field that is absent is an error, not null:
// `object.status.phase == "Failed"` fails on an object without a status,
// and then onError applies. Guard fields that may be absent with has(),
// one level at a time (has() fails too if an intermediate field is
// absent), or use optional selection:
//
//	has(object.status) && has(object.status.phase) && object.status.phase == "Failed"
//	object.?status.?phase.orValue("") == "Failed"
//	has(object.spec.replicas) && object.spec.replicas > 3
//	object.metadata.labels["tier"] == "web"             // fails without labels or without the key
//	object.?metadata.?labels[?"tier"].orValue("") == "web"
//
// An expression must have type bool; one of type dyn (`object.spec.paused`)
// is refused, compare it explicitly (`object.spec.paused == true`).
//
// # Order of the rules
//
// Decide applies, in order:
//
//  1. resyncs: an update whose old and new objects are the same object or
//     have the same resourceVersion is what client-go sends on resync and
//     relist; it is dropped ("resync") unless resyncs is true, in which
//     case the other rules still apply to it (and `changed`, if set, will
//     usually drop it: nothing changed).
//  2. generationChanged: with it, an update that leaves
//     metadata.generation as it was is dropped ("generation"), unless it
//     sets metadata.deletionTimestamp (a deletion starts without a new
//     generation). The filter is not asked, so such an update makes no
//     object start or stop matching: the plugin learns of that with the
//     object's next change of generation, or its delete.
//  3. filter: see the table below.
//  4. changed: an update that the filter lets through as an update is
//     dropped ("unchanged") unless at least one listed field differs
//     between old and new object (deep equality; absent and present
//     differ, absent on both sides does not). Adds, deletes and the
//     synthetic adds and deletes of the table are not affected.
//
// # Updates that cross the filter
//
// A plugin that only sees matching objects would keep a stale entry forever
// if an update that makes an object stop matching were simply dropped, and
// would get an update for an object it never saw when one starts matching.
// So, when the expression is a state predicate (it reads only object and
// resource), an update is judged on both states, and what the plugin gets
// keeps its view equal to the set of matching objects:
//
//	old object matches | new object matches | delivered
//	-------------------+--------------------+-------------------------------------------
//	yes                | yes                | the update (subject to changed)
//	yes                | no                 | a delete carrying the old object ("stopped-matching")
//	no                 | yes                | an add carrying the new object ("started-matching")
//	no                 | no                 | nothing ("filtered")
//
// Synthetic events have IsInInitialList and FinalStateUnknown unset and no
// OldObject; the delete carries the old object because that is the state
// the plugin knew.
//
// An expression that reads type or oldObject is an event predicate: it
// describes events, not objects, and there is no "did the old object
// match" to ask. Its updates are delivered as updates when it is true and
// dropped otherwise. Adds and deletes are delivered when the expression is
// true, for both kinds of expression.
//
// # Errors
//
// With onError "open" (the default) an evaluation error counts as a match,
// with "closed" as no match, and the table above applies as usual: the
// plugin's view stays consistent either way (an object delivered because
// its evaluation failed gets a delete when it later stops matching).
// Decision.Err carries the error whenever one occurred; Decision.Reason is
// "error" when an event was dropped because of one. Logging is the
// caller's, rate limited per binding: ErrorLimiter does that.
//
// # Cost
//
// CEL expressions can loop (all, exists, map, filter over lists and maps),
// and nested loops cost the product of the sizes. Two limits, as in
// Kubernetes:
//
//   - Compile estimates the worst-case cost with CEL's static estimator and
//     refuses an expression above Options.EstimatedCostLimit (10,000,000).
//     Objects are untyped, so the estimator cannot know how large a list
//     or string is; it assumes Options.AssumedMaxSize (1024) entries or
//     characters for every one. Under that assumption a loop over a list
//     costs thousands and is accepted, as are two nested loops doing
//     constant work (millions); two nested loops comparing strings from the
//     object (about a hundred million) and three nested loops (billions)
//     are refused.
//   - Every evaluation that could cost more than Options.CostLimit
//     (150,000, about 0.1 s of CPU: a nested loop over a 1,000-key
//     ConfigMap is stopped after 0.09 s, see BenchmarkRunawayStopped) is
//     stopped when it reaches it, which is an evaluation error. That is a
//     tenth of Kubernetes' per-call limit, whose units are cheaper than
//     this package's over unstructured objects (1,000,000 of them took
//     0.7-1.2 s here). Expressions whose estimated cost does not
//     depend on object sizes at all (no loops, no comparison of two object
//     values, ...) can never reach the limit and run without cost
//     tracking, which is a third of the price.
//
// # Evaluating once
//
// All Filters of one Cache with the same expression text share one
// compiled program and a memo of its results. A state predicate is
// evaluated once per object state: the N plugins bound to one resource with
// the same expression, each calling Decide from its own listener goroutine
// with its own Event, evaluate it once per notification, and the old
// object of an update has usually been judged already, as the new object
// of the previous notification. Event predicates are evaluated once per
// notification. The memo identifies an object state by the object's
// address, uid and resourceVersion, holds no reference to the object, and
// has a fixed number of slots (Options.MemoSize): a listener that lags far
// behind the others may re-evaluate, never get another object's result.
// Objects without a resourceVersion are evaluated every time.
//
// # Field paths
//
// Paths in changed are relative to the object root: `status.phase`,
// `spec.containers[0].image`, `metadata.labels["app.kubernetes.io/name"]`.
// They follow the grammar of abi/ABI.md section 9 (the paths a plugin
// hands to field_read, parsed by the same scanner), so a path is valid in
// one exactly when it is valid in the other. Keys containing . [ ] " or \
// go in brackets and double quotes (single quotes are not path syntax); a
// key may contain anything else, spaces and slashes included. In YAML,
// quote such entries: brackets are flow indicators.
//
//	changed:
//	  - status.phase
//	  - 'metadata.labels["app.kubernetes.io/name"]'
//
// Rule of direction: filter imports abi and event; config (validation)
// and host import it.
package filter
