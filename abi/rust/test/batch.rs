//! The Rust kit's batch test plugin (make plugins builds
//! build/kits/rs-batch-test.wasm; host/internal/engine TestKitBatch runs
//! it): the optional ih_handle_batch export (`batch:` of plugin!), the
//! same handler as ih_handle. Each event logs "<name> <phase>"; by the
//! first letter of the name, "e" is answered ERROR, "r" RETRY (each with
//! a message naming the event) and "p" panics, which aborts the instance.
//! The same plugin as the AssemblyScript kit's test/batch.ts.

use informer_host::{info, plugin, Event, Fail, Result};

fn handle(ev: &Event) -> Result {
    info!("{} {}", ev.name(), ev.get("status.phase").unwrap_or_default());
    match ev.name().as_bytes().first() {
        Some(b'e') => Err(Fail::error(format!("asked to fail {}", ev.name()))),
        Some(b'r') => Err(Fail::retry(format!("not yet {}", ev.name()))),
        Some(b'p') => panic!("asked to panic in {}", ev.name()),
        _ => Ok(()),
    }
}

plugin!(handle: handle, batch: handle);
