//! noop-rs: a Rust (abi/rust kit) handler that returns at once, with the
//! kit's optional ih_handle_batch export (`batch:`), for BenchmarkBatch:
//! batch=1 goes through ih_handle, as for a plugin without the export. The
//! kit still reads and parses each event's header, as noop-go's does.

use informer_host::{plugin, Event, Result};

fn handle(_ev: &Event) -> Result {
    Ok(())
}

plugin!(handle: handle, batch: handle);
