//! my-plugin: an informer-host plugin in Rust (abi/ABI.md), built with the
//! Rust kit. It logs every event with the object's phase, if it has one.
//! Build: ./build.sh (Debian's rustc: apt-get install rustc libstd-rust-dev-wasm32).

use informer_host::{info, plugin, Event, Header, Result};

fn handle(ev: &Event) -> Result {
    let phase = ev.get("status.phase").unwrap_or_else(|| "-".to_string());
    info!("{} {} phase={}", ev.event_type(), ev.key(), phase);
    Ok(())
}

fn synced(h: &Header) {
    info!("initial list of {} handled", h.resource_name());
}

plugin!(handle: handle, synced: synced);

#[cfg(test)]
mod tests {
    use informer_host::fake;

    // Runs natively against the kit's in-memory host: ./build.sh test
    #[test]
    fn logs_the_phase() {
        fake::reset();
        fake::event(1, 0, "pods", "default", "web-0");
        fake::field(0, "status.phase", 1, "Running");
        assert_eq!(fake::handle(super::handle), (0, String::new()));
        assert_eq!(fake::logs(), vec![(1, "add default/web-0 phase=Running".to_string())]);
    }
}
