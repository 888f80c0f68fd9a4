//! The Rust kit's test plugin for the capabilities II wrappers (make
//! plugins builds build/kits/rs-kit-test.wasm; host/internal/engine
//! TestKitRustFunctions runs it against fakes): each wrapper's result is
//! one "check <what>: <result>" log line for the Go test to compare, the
//! same calls as the AssemblyScript kit's test/kit.ts.

use informer_host::writes::{Preconditions, Target};
use informer_host::metrics::Metric;
use informer_host::{cache, events, http, info, last_call_error, plugin, state, writes, CallError, Event, Fail, Result};

fn check(what: &str, got: String) {
    info!("check {}: {}", what, got);
}

fn rv(r: std::result::Result<cache::Object, CallError>) -> String {
    match r {
        Ok(o) => format!("rv {}", o.get("metadata.resourceVersion").unwrap_or_default()),
        Err(e) => e.to_string(),
    }
}

fn unit(r: std::result::Result<(), CallError>) -> String {
    match r {
        Ok(()) => "0".to_string(),
        Err(e) => e.to_string(),
    }
}

/// What `?` makes of a cache, state or metrics call's failure.
fn failure<T>(r: std::result::Result<T, informer_host::Error>) -> String {
    match r {
        Ok(_) => "ok".to_string(),
        Err(e) => Fail::from(e).message,
    }
}

static UNGRANTED: Metric = Metric::counter("ungranted_total", "Never granted.", &[]);

fn handle(ev: &Event) -> Result {
    // Denied (secrets are not cached; the test grants no state and no
    // metrics): the failure names the call.
    check("cacheGet denied", failure(cache::get("secrets", "ns", "p2")));
    check("stateSet denied", failure(state::set(b"k", b"v")));
    let m = UNGRANTED.add(1.0, &[]);
    check("lastCallError", last_call_error().map(|e| e.to_string()).unwrap_or_default());
    check("metric denied", failure(m));
    check("lastCallError after ?", last_call_error().map(|e| e.to_string()).unwrap_or_else(|| "taken".into()));
    let t = Target { resource: "pods", namespace: "ns", name: "p1", ..Default::default() };
    let none = Preconditions::default();
    match writes::create(&Target { resource: "pods", namespace: "ns", ..Default::default() }, r#"{"metadata":{"name":"nü"}}"#.as_bytes()) {
        Ok(o) => check("k8sCreate", format!("{} {}", o.get("metadata.name").unwrap_or_default(), rv(Ok(o)))),
        Err(e) => check("k8sCreate", e.to_string()),
    }
    check("k8sApply", rv(writes::apply(&t, br#"{"kind":"Pod"}"#, true, &Preconditions { uid: "uid-p1", resource_version: "42" })));
    check("k8sApply mustExist", rv(writes::apply_with(&t, br#"{"kind":"Pod"}"#, &writes::ApplyOptions { must_exist: true, ..Default::default() }, &none)));
    check("k8sMergePatch", rv(writes::merge_patch(&t, b"{}", &Preconditions { resource_version: "old", ..none })));
    check("k8sJSONPatch", rv(writes::json_patch(&Target { subresource: "status", ..t }, b"[]", &none)));
    check("k8sDelete", unit(writes::delete(&t, &Preconditions { uid: "uid-p1", ..none })));
    check("k8sDelete denied", unit(writes::delete(&Target { resource: "secrets", namespace: "ns", name: "s", ..Default::default() }, &none)));
    check("k8sWrite op", writes::write(9, &t, b"{}", &none, 0).map(|h| h.to_string()).unwrap_or_else(|e| e.to_string()));
    check("recordEvent", unit(ev.record_event(events::WARNING, "TooLarge", "size é")));
    check("recordEvent bad", unit(ev.record_event(events::NORMAL, "Bad", "x")));
    if let Ok(Some(o)) = cache::get("pods", "ns", "p2") {
        check("recordEvent cached", unit(o.record_event(events::NORMAL, "Seen", "from the cache")));
    }
    match http::post("u", "/hook?x=1", "application/json", r#"{"é":1}"#.as_bytes()) {
        Ok(r) => check("httpPost", format!("{} {} {}", r.status, r.text(), r.header_value("X-Reply").unwrap_or("-"))),
        Err(e) => check("httpPost", e.to_string()),
    }
    let denied = http::get("nope", "/");
    check("httpGet denied", denied.as_ref().map(|r| r.status.to_string()).unwrap_or_else(|e| e.to_string()));
    check("httpResponseRead", http::response_read(http::BODY).map(|_| "found".to_string()).unwrap_or_else(|e| e.to_string()));
    if let Err(e) = denied {
        return Err(e.into());
    }
    Ok(())
}

plugin!(handle: handle);
