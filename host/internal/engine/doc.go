// Package engine runs informer-host plugins: WebAssembly modules that
// speak the plugin ABI (abi/ABI.md), on wazero's compiler. It is the only
// package that knows about wazero; the host drives it through a small API:
//
//	e, err := engine.New(ctx, engine.Options{CacheDir: dir, Logger: log})
//	defer e.Close(ctx)
//
//	// Once per plugin file. Refusals list every ABI problem at once.
//	m, err := e.Load(ctx, "pod-logger.wasm", wasm, engine.Limits{
//		MemoryPages: 1024,             // 64 MiB
//		CallTimeout: 2 * time.Second,  // 0: trusted, no deadline
//	})
//
//	// Once per (re)start of the plugin.
//	inst, err := m.Instantiate(ctx, engine.InstanceOptions{Config: cfg})
//
//	// Once per event, shared by every plugin:
//	env := engine.NewEnvelope(ev)
//	res, err := inst.Handle(ctx, env)
//	var f *engine.Failure
//	switch {
//	case errors.As(err, &f):
//		// Trap, timeout, out of memory or ABI violation: the instance is
//		// dead. Close it and instantiate afresh (then replay the cache as
//		// initial-list adds, as client-go does for a new listener).
//	case err != nil:
//		// ctx done, or instance closed: nothing happened.
//	case res.Code == engine.CodeRetry:
//		// deliver env again later
//	}
//
//	// Or, for a plugin configured as a controller (ABI.md §18), once
//	// per primary key, with the host's ControllerCall serving
//	// requeue_after, children_apply and status_apply; results and
//	// failures as Handle's:
//	res, err = inst.Reconcile(ctx, &engine.ReconcileRequest{
//		Env:  engine.NewReconcileEnvelope(ref, ns, name, obj), // obj nil: absent
//		Call: call,
//	})
//
//	inst.Shutdown(ctx) // ih_shutdown, on an orderly stop
//	inst.Close(ctx)
//
// # Ports
//
// What a plugin reaches outside itself, the engine reaches through ports
// the host implements: CacheReader, StateBucket, MetricSet, ClusterWriter,
// HTTPClient and EventRecorder (InstanceOptions), and per reconcile call
// ControllerCall (ReconcileRequest). Their methods take and
// return bytes, strings and the ABI's codes, so the engine imports no
// daemon package, only the abi module, event and wasmbin (the binary
// reader and rewriter, which knows no wazero): the host adapts its
// informer caches (host/cacheread.go) and state store
// (host/internal/stateport) to them. host and its subpackages (replay,
// inspect) and the benchmarks import the engine; the engine imports none
// of them.
//
// # Isolation
//
// Every instance has its own linear memory, capped by Limits.MemoryPages,
// no files, no environment, no network, and one argument (its name). A
// trap, exit, timeout or exhausted memory fails only the call in progress
// with a *Failure and kills only that instance; nothing a plugin does can
// panic the host (host functions check every pointer, and everything that
// calls into wazero recovers). Plugin output (stdout, stderr, the log
// import) goes to the logger line by line, rate limited per instance.
//
// # Runtimes and compilation
//
// wazero fixes the memory limit and its termination checks per Runtime, so
// the engine keeps one Runtime per distinct (MemoryPages, wazero checks on
// or off) and shares one compilation cache among them: identical bytes are
// compiled once per kind of checks, and concurrent Loads of the same bytes
// wait for one compilation. With Options.CacheDir the compiled code also
// survives restarts of the host.
//
// # Deadlines
//
// A module with a CallTimeout is validated as written, then gets
// termination checks injected before it is compiled (wasmbin/checks.go): a
// countdown at every function entry and loop iteration, bulk memory and
// table instructions charged by size (memory.fill and memory.copy cut into
// 64 KiB pieces), an exit to Go every thousand units (so the Go runtime can
// preempt the goroutine and a garbage collection never waits for a
// spinning plugin), and a trap when the engine-wide watchdog (see
// watchdog.go) has raised the instance's stop flag. WASI calls that take a
// size end a call that is being killed. A valid module the rewriter cannot
// read is refused: wazero's own checks, at loop headers only, would leave
// recursion unbounded.
// CallTimeout bounds a call's running time: the monotonic clock less a
// capability's network wait (io.go). It is not the thread's CPU time, so
// a call kept waiting for a core on an overloaded node spends its
// deadline as if it ran (RATIONALE.md, Failure, says why and what it
// costs). Limits.MaxCallTime bounds the call's wall time, waits
// included, and Limits.MaxHostCallsPerCall its host calls; a call killed
// while it waits ends that wait at once and does not get back to the
// guest.
// Without CallTimeout there are no checks: a plugin that loops forever
// hangs its instance (and, being compiled code the Go runtime cannot
// preempt, stalls the next garbage collection); Load still runs its start
// functions once under a deadline, so a module that cannot even start is
// refused. BENCHMARKS.md has the measurements.
//
// # Concurrency
//
// Engine and Module are safe for concurrent use. An Instance is not: the
// host calls each instance from one goroutine at a time. An Envelope is
// safe for concurrent use by any number of instances.
//
// Rule of direction: engine imports abi and event; host, host/inspect and
// host/replay import it (it is internal to host/). It is not to import
// informer or state: what a capability reaches, the host hands it as an
// interface (internal/housemap's direction test holds it to that).
package engine
