// Package host runs WebAssembly plugins as listeners of the informer
// pipeline: it loads the *.wasm files of one directory, feeds each plugin
// the events of its bindings, and keeps it running across failures,
// reloads and sharding changes. It owns everything between a binding's
// informer listener and the plugin's ih_handle call, and what the
// plugin's host calls reach (the cache, state, metrics, writes, HTTP,
// Events); it reports the facts (Status, ShardStatus, Collect) and leaves
// their presentation to the daemon's server.
//
// Rule of direction: host is the embeddable daemon library's centre
// (RATIONALE.md, "Project structure"), imported by the daemon
// (internal/daemon, cmd/informer-host, internal/server) and by tests and
// benchmarks; it imports the
// informer pipeline, the event type, abi and the daemon-only packages
// under internal/ (internal/controllerwrites among them), and its own
// host/internal/engine (wazero),
// host/internal/delivery (the queue) and host/internal/reconcile (the
// controller's keyed queue and mapping).
// Nothing it imports imports it.
//
// # The map
//
// One event's way, and the types that carry it:
//
//	Host            one plugin directory (host.go): slots by file name,
//	 │              the engine, the envelopes shared by plugins, sharding
//	 └ PluginSlot   one file (slot.go): outlives versions and instances;
//	    │           state, counters, last error, the current generation
//	    └ generation  one loaded version: its module, settings, listeners
//	       │          (bindingListener, one per binding) and its worker;
//	       │          a reload makes a new one
//	       ├ convergence  the per-object retries, parking and giving up
//	       │              (converge.go), for both ways into the plugin
//	       ├ shardView    the worker's applied sharding Assignment and the
//	       │              fencing of its calls (shard.go), for both ways
//	       ├ reconciler   a controller-mode generation's loop instead of
//	       │              the event delivery (reconcile.go): the listeners
//	       │              map events to primary keys (reconcile.Mapper)
//	       │              into a keyed workqueue (reconcile.Queue), the
//	       │              worker calls ih_reconcile per key and settles
//	       │              through controllerwrites.Writer
//	       ├ delivery.Queue  the buffer between the listeners and the
//	       │                 worker (host/internal/delivery)
//	       ├ missedDeletes   the keys the plugin has, remembered across
//	       │                 restarts in internal/seenkeys, and the
//	       │                 deletes it missed (missed.go)
//	       └ engine.Instance the running module; the worker's alone, and
//	                         replaced on a failure (restart)
//
// A client-go listener goroutine calls bindingListener.OnAdd/OnUpdate/
// OnDelete; the binding's filter decides (slot.go), the event and its
// shared envelope go into the queue, and the worker takes them out: its
// loop is generation.run (slot.go), and each entry's way into the plugin
// and back is generation.deliver (deliver.go), read as prepare → call →
// settle. In controller mode the listeners hand events to the
// reconciler instead, and generation.run runs reconciler.run, read as
// key → call → settle (reconcile.go). With Options.Tracer, each call is
// a trace (tracing.go): a root span per delivery or reconcile and the
// guest call's span, whose context the engine hands the capabilities.
//
// # Goroutines
//
// Each is started and ended by one owner:
//
//   - the worker, generation.run: one per generation, started by
//     Host.start once the generation is current (go g.run); it ends when
//     stopCh is closed (a reload's or an unload's retire, Halt, a Stop
//     that gave up), when drainCh is closed and the queue is drained
//     (Stop), when the plugin is quarantined, or when it failed after
//     being replaced. It closes done when it returns, having shut the
//     instance down and emptied the queue. It is the only goroutine that
//     calls into the instance, and the only one that touches the fields
//     of the generation marked as the worker's own.
//   - the listeners: client-go's, one per registration, which
//     generation.register adds (Pipeline.AddListener) and
//     generation.unregister removes; Remove returns once no callback is
//     in flight. They never block: the queue never makes them wait.
//   - a retirement: Host.retire starts one per generation it stops (its
//     listeners, then its worker, then its module) and tracks it in
//     Host.retiring until it is done; Stop waits for them within its
//     context.
//   - Stop and Halt: one per slot, each draining or stopping its
//     generation, all joined before Stop returns.
//   - a controller's queue closer: reconciler.run starts one per run, which
//     shuts the keyed queue down (ending its blocking Get) when stopCh or
//     drainCh closes or the run returns.
//   - a fence watcher: shardView.callContext starts one per sharded
//     generation, on its first call; it cancels the calls' context when
//     stopCh or done closes, and then forgets the generation's view.
//   - the directory watch (dirwatch.go): Watch runs on its caller's
//     goroutine and starts one goroutine per file it looks at, all joined
//     before Watch returns; LoadDir loads up to one file per CPU at once,
//     joined before it returns.
//   - a departed members' read: a sharded generation's worker starts one
//     when its Assignment changes (missedDeletes.followGroup, missed.go);
//     it reads the sets of the members that left, hands them over on a
//     buffered channel, wakes the worker and ends, within a minute.
//   - the seen keys' flusher (internal/seenkeys): started with the
//     store (by Host.New, or the daemon that hands one in Options), and
//     ended by Host.Stop after it wrote what changed.
//   - timers: the memory release (memrelease.go) and the watch's
//     debounce run on time.AfterFunc.
//
// # Locks
//
// Lock order, outermost first; a lock is never taken while one after it
// is held:
//
//	fileLock.mu            a file's load lock (Host.lockFile)
//	Host.mu                slots, held, retiring, cfg
//	generation.regsMu      each binding's registration, closed
//	PluginSlot.mu          state, current, lastErr, failures
//	delivery.Queue's lock  the queue's own (taken inside its methods)
//
// Host.unmatchedMu comes before Host.mu (a look reads the config) and is
// never taken under it. shardState.callsMu, convergence.mu,
// reconciler.mapMu and reconciler.initialMu (and reconcile.Queue's own), the
// memReleaser's (taken under the queue's lock, by its onReleased), the
// recording's and the directory watch's locks, viewKeys.mu and each
// keyTable.mu (the plugins' views' shared keys, view.go), and the seen
// keys' (internal/seenkeys: its Store's lock, then a Set's), are leaves:
// nothing else is taken under them. PluginSlot.mu is never held
// while taking regsMu or calling into the pipeline; Status copies what it
// needs from the slot and reads the generation after unlocking. Each
// field says at its declaration which lock guards it, or that it is the
// worker's own.
package host
