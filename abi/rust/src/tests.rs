// Unit tests of the kit against the fake host (rustc --test on the host target).
use crate::{cache, fake, metrics::Metric, state, EventType, Field, Header, Kind};

#[test]
fn header_parse() {
    let b = Header::build(2, 0x05, ["pods", "", "v1", "pods", "Pod", "default", "web-0", "u1", "5"]);
    assert_eq!(b.len(), 108); // the example of ABI.md section 8
    let h = Header::parse(b.clone()).unwrap();
    assert_eq!(h.event_type(), EventType::Update);
    assert!(h.initial_list() && !h.final_state_unknown() && h.has_old_object());
    assert_eq!((h.namespace(), h.name(), h.uid(), h.resource_version()), ("default", "web-0", "u1", "5"));
    assert_eq!(h.key(), "default/web-0");
    // Descriptors past the nine of v1 are ignored; broken headers refused.
    let mut more = b.clone();
    more[3] = 10; // a tenth descriptor (over the strings here: it is not read)
    assert_eq!(Header::parse(more).unwrap().name(), "web-0");
    let mut few = b.clone();
    few[3] = 8;
    assert!(Header::parse(few).is_err());
    let mut bad = b.clone();
    bad[0] = 2;
    assert!(Header::parse(bad).is_err());
    let mut out = b;
    out[60] = 200; // name's length past the end
    assert!(Header::parse(out).is_err());
}

fn handler(ev: &crate::Event) -> crate::Result {
    let phase = ev.field("status.phase")?;
    let old = ev.old_get("status.phase").unwrap_or_else(|| "-".into());
    crate::info!("{} {} {} (was {})", ev.event_type(), ev.key(), phase.as_str(), old);
    state::set(ev.key().as_bytes(), &phase.bytes)?;
    static EVENTS: Metric = Metric::counter("events_total", "Events by \"type\".", &["namespace", "type"]);
    EVENTS.add(1.0, &[ev.namespace(), &ev.event_type().to_string()])?;
    Ok(())
}

#[test]
fn handle_through_the_kit() {
    fake::reset();
    fake::event(2, 0x04, "pods", "shop", "web-0");
    fake::field(0, "status.phase", 1, &"R".repeat(1000)); // past the first buffer: read twice
    fake::field(1, "status.phase", 1, "Pending");
    fake::object(1, "{}");
    assert_eq!(fake::handle(handler), (0, String::new()));
    let want = format!("update shop/web-0 {} (was Pending)", "R".repeat(1000));
    assert_eq!(fake::logs(), vec![(1, want)]);
    assert_eq!(fake::state_value(b"shop/web-0"), Some("R".repeat(1000).into_bytes()));
    assert_eq!(fake::metric_declarations(),
        vec![r#"0 {"name":"events_total","help":"Events by \"type\".","labels":["namespace","type"]}"#.to_string()]);
    assert_eq!(fake::metric_updates(), vec!["add 0 1 shop,update".to_string()]);

    // A missing field is ERROR with the code's name as the message.
    fake::reset();
    fake::event(1, 0, "pods", "shop", "web-1");
    assert_eq!(fake::handle(handler), (3, "ERR_NOT_FOUND".to_string()));
}

#[test]
fn field_kinds() {
    fake::reset();
    fake::event(1, 0, "pods", "", "n");
    fake::field(0, "spec.replicas", 2, "3");
    let f = crate::read_field(0, "spec.replicas").unwrap();
    assert_eq!(f, Field { kind: Kind::Number, bytes: b"3".to_vec() });
    assert_eq!(crate::read_field(1, "x"), Err(crate::Error::ABSENT));
}

#[test]
fn cache_pages() {
    for k in ["a/p1", "a/p2", "a/p3", "b/p4", "a/p5"] {
        fake::cached("pods", k, &[("status.phase", 1, "Running")]);
    }
    assert_eq!(cache::index("pods", "namespace", "a").unwrap(), vec!["a/p1", "a/p2", "a/p3", "a/p5"]);
    assert_eq!(cache::list("pods", "", "").unwrap().len(), 5);
    let o = cache::get("pods", "a", "p2").unwrap().unwrap();
    assert_eq!(o.get("status.phase").as_deref(), Some("Running"));
    assert_eq!(cache::get("pods", "a", "zz").unwrap(), None);
    assert_eq!(cache::split_key("a/p1"), ("a", "p1"));
    assert_eq!(cache::split_key("node"), ("", "node"));
}

#[test]
fn state_versions_and_lists() {
    let v = state::set_if(b"k1", b"one", state::ABSENT).unwrap();
    assert_eq!(state::set_if(b"k1", b"again", state::ABSENT), Err(crate::Error::CONFLICT));
    assert_eq!(state::get(b"k1").unwrap(), Some((b"one".to_vec(), v)));
    for i in 2..6 {
        state::set(format!("k{}", i).as_bytes(), b"").unwrap();
    }
    assert_eq!(state::list(b"k", b"k2", 2).unwrap(), vec![b"k3".to_vec(), b"k4".to_vec()]);
    assert_eq!(state::keys(b"k").unwrap().len(), 5);
    assert_eq!(state::delete(b"k1"), Ok(true));
    assert_eq!(state::delete(b"k1"), Ok(false));
    assert_eq!(state::get(b"k1").unwrap(), None);
    assert_eq!(state::parse_list(&[3, 0, 0, 0, b'a'], 1), Err(crate::Error::INTERNAL));
}

#[test]
fn error_names() {
    assert_eq!(crate::Error(-18).name(), "ERR_CANCELED");
    assert_eq!(crate::Error::FIELD_CONFLICT.name(), "ERR_FIELD_CONFLICT");
    assert_eq!(crate::Error(-20).name(), "ERR_UNKNOWN");
    assert_eq!(crate::Error(-1).to_string(), "ERR_ABSENT");
    assert_eq!(crate::Error(-99).name(), "ERR_UNKNOWN");
    let f: crate::Fail = crate::Error::RATE_LIMITED.into();
    assert_eq!(f.code, crate::Code::Retry);
}

#[test]
fn capabilities_ii() {
    use crate::{events, http, writes, CallError, Error};
    fake::reset();
    fake::cached("pods", "shop/web-0", &[("metadata.resourceVersion", 1, "8")]);
    let t = writes::Target { resource: "pods", namespace: "shop", name: "web-0", ..Default::default() };
    let pre = writes::Preconditions { uid: "u1", resource_version: "7" };
    let o = writes::apply(&t, br#"{"kind":"Pod"}"#, true, &pre).unwrap();
    assert_eq!(o.get("metadata.resourceVersion").as_deref(), Some("8"));
    fake::answer(-9, "the object has been modified");
    let e = writes::merge_patch(&t, b"{}", &writes::Preconditions::default()).unwrap_err();
    assert_eq!(e, CallError { code: Error::CONFLICT, message: "the object has been modified".into() });
    assert_eq!(e.to_string(), "ERR_CONFLICT: the object has been modified");
    let f: crate::Fail = e.into();
    assert_eq!(f.code, crate::Code::Error);
    writes::delete(&t, &writes::Preconditions { uid: "u1", ..Default::default() }).unwrap();
    assert_eq!(fake::writes(), vec![
        r#"4 pods shop/web-0 sub= uid=u1 rv=7 flags=1 body={"kind":"Pod"}"#.to_string(),
        "2 pods shop/web-0 sub= uid= rv= flags=0 body={}".to_string(),
        "5 pods shop/web-0 sub= uid=u1 rv= flags=0 body=".to_string(),
    ]);
    events::record(0, events::WARNING, "TooLarge", "big").unwrap();
    fake::answer(-5, "bad reason");
    assert_eq!(o.record_event(events::NORMAL, "no spaces", "x").unwrap_err().message, "bad reason");
    assert_eq!(fake::events(), vec!["0 1 TooLarge big".to_string(), format!("{} 0 no spaces x", o.0)]);
    fake::http_response(201, "Content-Type: text/plain\nX-Reply: yes\n", "créé".as_bytes());
    let r = http::post("hook", "/x", "application/json", b"{}").unwrap();
    assert_eq!((r.status, r.text(), r.header_value("X-Reply")), (201, "créé".to_string(), Some("yes")));
    fake::answer(-15, "no answer within 5s");
    let e = http::get("hook", "/slow").unwrap_err();
    assert_eq!(e.code, Error::TIMEOUT);
    assert_eq!(crate::Fail::from(e).code, crate::Code::Retry);
    assert_eq!(http::response_read(http::BODY), Err(Error::ABSENT));
    assert_eq!(fake::http_requests(), vec![
        r#"hook POST /x "Content-Type: application/json\n" {}"#.to_string(),
        r#"hook GET /slow "" "#.to_string(),
    ]);
}
