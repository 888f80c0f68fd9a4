//! pod-phase-rs: logs every phase change of a pod, counts the changes per
//! namespace and phase, and keeps the namespace's pod count from the
//! cache. Built from the Rust kit (abi/rust) with Debian's rustc 1.63:
//! `make plugins` (mk/kits.mk). Grants: state (each pod's last phase
//! survives restarts and reloads), metrics, cache for its resource.
//!
//! A pod whose phase the plugin already knows from state is not logged
//! again after a restart: the replayed initial list repeats what it saw.

use informer_host::metrics::Metric;
use informer_host::{cache, info, plugin, state, Event, EventType, Fail, Header, Result};

static CHANGES: Metric = Metric::counter("pod_phase_changes_total", "Pod phase changes by namespace and new phase.", &["namespace", "phase"]);
// Not "pods": ns-counter exports that name with other labels, and one name
// is one metric across plugins (the second to declare it gets ERR_EXISTS).
static PODS: Metric = Metric::gauge("namespace_pods", "Pods in the namespace, from the host's cache.", &["namespace"]);

fn key(ev: &Event) -> String {
    format!("phase/{}", ev.key())
}

fn handle(ev: &Event) -> Result {
    let key = key(ev);
    let before = state::get(key.as_bytes())?.map(|(v, _)| String::from_utf8_lossy(&v).into_owned());
    if ev.event_type() == EventType::Delete {
        state::delete(key.as_bytes())?;
        info!("pod {} deleted (was {})", ev.key(), before.as_deref().unwrap_or("unknown"));
    } else {
        let phase = ev.get("status.phase").unwrap_or_else(|| "Unknown".to_string());
        if before.as_deref() != Some(phase.as_str()) {
            state::set(key.as_bytes(), phase.as_bytes())?;
            info!("pod {}: {} -> {}", ev.key(), before.as_deref().unwrap_or("none"), phase);
            CHANGES.add(1.0, &[ev.namespace(), &phase])?;
        }
    }
    // The namespace's pods as the host's cache has them now.
    let res = ev.header().resource_name();
    match cache::index(res, "namespace", ev.namespace()) {
        Ok(keys) => {
            PODS.set(keys.len() as f64, &[ev.namespace()])?;
        }
        Err(e) => return Err(Fail::error(format!("cache_index {}: {}", res, e))),
    }
    Ok(())
}

fn synced(h: &Header) {
    let n = state::keys(b"phase/").map(|k| k.len()).unwrap_or(0);
    info!("initial list of {} handled: {} pods tracked", h.resource_name(), n);
}

plugin!(handle: handle, synced: synced);
