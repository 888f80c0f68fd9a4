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

fn batch_handler(ev: &crate::Event) -> crate::Result {
    crate::info!("{}", ev.name());
    match ev.name() {
        "bad" => Err(crate::Fail::error("no good")),
        "later" => Err(crate::Fail::retry("not yet")),
        // A cache handle is per event: the host drops it at the next one.
        "cached" => match cache::get("pods", "shop", "web-0")? {
            Some(o) if o.0 == 2 => Ok(()),
            o => Err(crate::Fail::error(format!("handle {:?}, want 2", o))),
        },
        _ => Ok(()),
    }
}

// ih_handle_batch calls the handler once per event, in order, and settles
// each with its own result and message before the next (a RETRY or an
// ERROR is that event's alone); it returns how many it settled.
#[test]
fn handle_batch_settles_each_event() {
    fake::reset();
    fake::cached("pods", "shop/web-0", &[]);
    let ev = |name| (1u8, 0u8, "pods", "shop", name);
    let (n, results) = fake::handle_batch(batch_handler, &[ev("a"), ev("cached"), ev("bad"), ev("cached"), ev("later"), ev("z")]);
    assert_eq!(n, 6);
    let want: Vec<(i32, String)> = vec![(0, "".into()), (0, "".into()), (3, "no good".into()), (0, "".into()), (1, "not yet".into()), (0, "".into())];
    assert_eq!(results, want);
    let names: Vec<String> = fake::logs().into_iter().map(|(_, m)| m).collect();
    assert_eq!(names, ["a", "cached", "bad", "cached", "later", "z"]);
    // Outside a batch the imports say there is none, as the host's do.
    assert_eq!(unsafe { crate::raw::batch_select(0) }, crate::Error::NO_EVENT.0);
    assert_eq!(unsafe { crate::raw::batch_result(0) }, crate::Error::NO_EVENT.0);
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

fn call_error(function: &'static str, call: &str, code: crate::Error, message: &str) -> crate::CallError {
    crate::CallError { function, call: call.to_string(), code, message: message.to_string() }
}

// The default answer applies writes to the fake cache; each write is
// recorded as made, and a failure names the call and carries the message.
#[test]
fn writes_apply_to_the_cache() {
    use crate::{writes, Error};
    use fake::WriteRequest;
    fake::reset();
    fake::cached_json("configmaps", r#"{"metadata":{"name":"x","namespace":"demo","uid":"u1","resourceVersion":"5"},"data":{"a":"1"}}"#);
    let x = writes::Target { resource: "configmaps", namespace: "demo", name: "x", ..Default::default() };
    let none = writes::Preconditions::default();
    let o = writes::apply(&x, br#"{"apiVersion":"v1","kind":"ConfigMap","data":{"b":"2"}}"#, false, &writes::Preconditions { uid: "u1", resource_version: "5" }).unwrap();
    assert_eq!((o.get("data.a"), o.get(r#"data["b"]"#), o.get("metadata.resourceVersion")), (Some("1".into()), Some("2".into()), Some("1".into())));
    let c = cache::get("configmaps", "demo", "x").unwrap().unwrap();
    assert_eq!(c.get("data.b").as_deref(), Some("2"), "a later cache read sees the write");
    // The event's resourceVersion is stale after the write.
    let e = writes::merge_patch(&x, br#"{"data":{"a":null}}"#, &writes::Preconditions { resource_version: "5", ..none }).unwrap_err();
    assert_eq!(e.to_string(), "k8s_write merge-patch configmaps demo/x: ERR_CONFLICT: the object has been modified (resourceVersion 1, precondition 5)");
    let o = writes::merge_patch(&writes::Target { subresource: "status", ..x }, br#"{"data":{"a":null}}"#, &none).unwrap();
    assert_eq!((o.get("data.a"), o.get("data.b")), (None, Some("2".into())));
    let y = writes::Target { name: "y", ..x };
    let e = writes::apply_with(&y, br#"{"apiVersion":"v1","kind":"ConfigMap"}"#, &writes::ApplyOptions { force: true, must_exist: true }, &none).unwrap_err();
    assert_eq!(e, call_error("k8s_write", "apply --force --must-exist configmaps demo/y", Error::ABSENT, r#"configmaps "y" not found"#));
    let created = writes::create(&writes::Target { resource: "v1/configmaps", namespace: "demo", ..Default::default() }, br#"{"metadata":{"name":"y"},"data":{"n":"1"}}"#).unwrap();
    assert_eq!((created.get("metadata.name"), created.get("metadata.namespace")), (Some("y".into()), Some("demo".into())));
    let e = writes::create(&y, b"{}").unwrap_err();
    assert_eq!(e.to_string(), r#"k8s_write create configmaps demo/y: ERR_EXISTS: configmaps "y" already exists"#);
    writes::delete(&y, &none).unwrap();
    assert_eq!(cache::get("configmaps", "demo", "y").unwrap().map(|o| o.0), None);
    let e = writes::apply(&x, br#"{"apiVersion":"v1"}"#, false, &none).unwrap_err();
    assert_eq!(e.to_string(), "k8s_write apply configmaps demo/x: ERR_INVALID: the applied configuration has no kind");
    let e = writes::write(9, &x, b"{}", &none, 0).unwrap_err();
    assert_eq!(e.to_string(), "k8s_write op 9 configmaps demo/x: ERR_INVALID: unknown op 9");
    let w = fake::writes();
    assert_eq!(w.len(), 9);
    assert_eq!(w[0], WriteRequest {
        op: "apply", resource: "configmaps".into(), namespace: "demo".into(), name: "x".into(),
        body: r#"{"apiVersion":"v1","kind":"ConfigMap","data":{"b":"2"}}"#.into(), uid: "u1".into(), resource_version: "5".into(),
        ..Default::default()
    });
    assert_eq!((w[2].subresource.as_str(), w[3].force, w[3].must_exist, w[6].op), ("status", true, true, "delete"));
}

// on_write programs the apiserver; answer fails the next call; a
// rate limit is a RETRY with the whole call in its message.
#[test]
fn on_write() {
    use crate::{writes, Code, Error, Fail};
    fake::reset();
    fake::on_write(|r| match r.name.as_str() {
        "x" => (Error::RATE_LIMITED.0, "would wait 12s for the plugin's API budget".into()),
        "answered" => (0, r#"{"metadata":{"name":"answered","resourceVersion":"77"}}"#.into()),
        _ => fake::apply_write(r),
    });
    let t = |name| writes::Target { resource: "configmaps", namespace: "demo", name, ..Default::default() };
    let apply = br#"{"apiVersion":"v1","kind":"ConfigMap"}"#;
    let none = writes::Preconditions::default();
    let e = writes::apply(&t("x"), apply, false, &none).unwrap_err();
    assert_eq!(e.to_string(), "k8s_write apply configmaps demo/x: ERR_RATE_LIMITED: would wait 12s for the plugin's API budget");
    let f: Fail = e.into();
    assert_eq!(f.code, Code::Retry);
    assert_eq!(writes::apply(&t("answered"), apply, false, &none).unwrap().get("metadata.resourceVersion").as_deref(), Some("77"));
    writes::apply(&t("z"), apply, false, &none).unwrap();
    assert!(fake::cached_fields("configmaps", "demo/z").is_some(), "the write handed to apply_write is cached");
    fake::answer(Error::CONFLICT.0, "the object has been modified");
    let e = writes::delete(&t("z"), &none).unwrap_err();
    assert_eq!(e, call_error("k8s_write", "delete configmaps demo/z", Error::CONFLICT, "the object has been modified"));
    assert_eq!(Fail::from(e).code, Code::Error);
}

#[test]
fn events() {
    use crate::{events, Error};
    fake::reset();
    fake::event(1, 0, "configmaps", "demo", "x");
    fake::field(0, "metadata.name", 1, "x");
    fake::field(0, "metadata.namespace", 1, "demo");
    fake::cached_json("nodes", r#"{"metadata":{"name":"n1"}}"#);
    fn handler(ev: &crate::Event) -> crate::Result {
        ev.record_event(events::WARNING, "ConfigMapTooLarge", "data is 2048 bytes")?;
        cache::get("nodes", "", "n1")?.unwrap().record_event(events::NORMAL, "Seen", "")?;
        let e = ev.record_event(events::NORMAL, "two words", "").unwrap_err();
        assert_eq!(e.to_string(), r#"event_record Normal two words about demo/x: ERR_INVALID: reason "two words" is not 1 to 128 letters, digits and _-.:"#);
        let e = ev.record_event(events::NORMAL, "Big", &"m".repeat(1025)).unwrap_err();
        assert_eq!(e.code, Error::TOO_LARGE);
        fake::answer(Error::DENIED.0, "events not granted");
        Err(ev.record_event(events::NORMAL, "Seen", "").unwrap_err().into())
    }
    assert_eq!(fake::handle(handler), (3, "event_record Normal Seen about demo/x: ERR_DENIED: events not granted".to_string()));
    let e = fake::events();
    assert_eq!(e.len(), 2);
    assert_eq!(e[0], fake::RecordedEvent { which: 0, event_type: "Warning", reason: "ConfigMapTooLarge".into(), message: "data is 2048 bytes".into() });
    assert_eq!((e[1].which, e[1].event_type, e[1].reason.as_str()), (2, "Normal", "Seen"));
}

#[test]
fn http() {
    use crate::{http, Error};
    fake::reset();
    fake::on_http("chat", |r| match r.path.as_str() {
        "/slow" => fake::HttpResponse { code: Error::TIMEOUT.0, message: r#"upstream "chat" did not answer within its timeout (10s)"#.into(), ..Default::default() },
        _ => fake::HttpResponse { status: 201, header: "Content-Type: text/plain\nX-Reply: yes\n".into(), body: "créé".into(), ..Default::default() },
    });
    fake::http_response(503, "", b"busy");
    let r = http::post("chat", "/crashloop?x=1", "application/json", b"{}").unwrap();
    assert_eq!((r.status, r.text(), r.header_value("X-Reply")), (201, "créé".to_string(), Some("yes")));
    assert_eq!(http::get("other", "/").unwrap().status, 503, "http_response answers upstreams without on_http");
    let e = http::get("chat", "/slow").unwrap_err();
    assert_eq!(e.to_string(), r#"http_request chat GET /slow: ERR_TIMEOUT: upstream "chat" did not answer within its timeout (10s)"#);
    assert_eq!(crate::Fail::from(e).code, crate::Code::Retry);
    assert_eq!(http::response_read(http::BODY), Err(Error::ABSENT));
    let e = http::get("chat", "/a/../secret").unwrap_err();
    assert_eq!(e.code, Error::INVALID);
    let r = fake::http_requests();
    assert_eq!(r[0], fake::HttpRequest {
        upstream: "chat".into(), method: "POST".into(), path: "/crashloop?x=1".into(),
        header: vec![("Content-Type".into(), "application/json".into())], body: b"{}".to_vec(),
    });
    assert_eq!(r.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(), vec!["/crashloop?x=1", "/", "/slow"]);
}

#[test]
fn self_write_and_flags() {
    fake::reset();
    fake::event(2, 0x08 | 0x04, "pods", "shop", "web");
    fn handler(ev: &crate::Event) -> crate::Result {
        assert!(ev.self_write() && !ev.initial_list() && !ev.handed_over());
        Ok(())
    }
    assert_eq!(fake::handle(handler), (0, String::new()));
    fake::event(3, 0x10, "pods", "shop", "web");
    fn deleted(ev: &crate::Event) -> crate::Result {
        assert!(!ev.self_write() && ev.handed_over());
        Ok(())
    }
    assert_eq!(fake::handle(deleted), (0, String::new()));
}

#[test]
fn json_and_config() {
    use crate::json::{parse, Value};
    for (text, want) in [
        ("null", Ok("null")),
        (r#" {"b":[1,-2.5e3,true],"a":"\u00e9\n\"","c":{}} "#, Ok(r#"{"a":"é\n\"","b":[1,-2.5e3,true],"c":{}}"#)),
        ("[1,]", Err("unexpected character at byte 3")),
        ("01", Err("a number with a leading zero at byte 2")),
        (r#"{"a" 1}"#, Err("expected : at byte 5")),
        ("1 2", Err("text after the value at byte 2")),
        (r#""\ud83d\ude00""#, Ok(r#""😀""#)),
    ] {
        assert_eq!(parse(text.as_bytes()).map(|v| v.to_string()), want.map(String::from).map_err(String::from), "{}", text);
    }
    let v = parse(br#"{"key":"team","n":3,"on":true,"list":["a"]}"#).unwrap();
    assert_eq!((v.get("key").and_then(Value::as_str), v.get("n").and_then(Value::as_i64), v.get("on").and_then(Value::as_bool)), (Some("team"), Some(3), Some(true)));
    assert_eq!(v.get("list").and_then(|l| l.at(0)).and_then(Value::as_str), Some("a"));
    fake::set_config(br#"{"key":"team"}"#);
    assert_eq!(crate::config_json().unwrap().get("key").and_then(Value::as_str), Some("team"));
    fake::set_config(b"");
    assert_eq!(crate::config_json(), Ok(Value::Null));
    fake::set_config(b"{key: team}");
    assert_eq!(crate::config_json(), Err("the configuration is not JSON: expected a member name at byte 1".to_string()));
}

// A denied or invalid cache read, state call or metric update is kept
// as a CallError naming the call, which `?` makes the handler's failure;
// a miss and a conflict keep nothing (they are what a plugin expects).
#[test]
fn capability_errors_name_the_call() {
    use crate::{last_call_error, Error};
    static REFUSED: Metric = Metric::counter("refused_total", "Updates the fake refuses.", &[]);
    let cases: &[(&str, Option<&'static str>, fn() -> crate::Result, Option<&str>)] = &[
        ("cache get denied", Some("cache"), || cache::get("secrets", "shop", "token").map(|_| ()).map_err(Into::into),
            Some("cache_get secrets shop/token: ERR_DENIED")),
        ("cache list with a bad selector", None, || cache::list("pods", "shop", "app in web").map(|_| ()).map_err(Into::into),
            Some("cache_list pods in shop -l app in web: ERR_INVALID")),
        ("cache index denied", Some("cache"), || cache::owned("pods", "u-1").map(|_| ()).map_err(Into::into),
            Some("cache_index pods owner=u-1: ERR_DENIED")),
        ("cache miss", None, || cache::get("pods", "shop", "gone").map(|_| ()).map_err(Into::into), None),
        ("state get denied", Some("state"), || state::get(b"phase/web").map(|_| ()).map_err(Into::into),
            Some(r#"state_get "phase/web": ERR_DENIED"#)),
        ("state set of an empty key", None, || state::set(b"", b"v").map(|_| ()).map_err(Into::into),
            Some(r#"state_set "": ERR_INVALID"#)),
        ("state delete denied", Some("state"), || state::delete(b"k").map(|_| ()).map_err(Into::into),
            Some(r#"state_delete "k": ERR_DENIED"#)),
        ("state list denied", Some("state"), || state::list(b"phase/", b"", 10).map(|_| ()).map_err(Into::into),
            Some(r#"state_list prefix "phase/" after "": ERR_DENIED"#)),
        ("state miss", None, || state::get(b"gone").map(|_| ()).map_err(Into::into), None),
        ("state conflict", None, || state::set_if(b"k", b"v", state::ABSENT).map(|_| ()).map_err(Into::into),
            Some("ERR_CONFLICT")),
        ("metric declaration denied", Some("metrics"), || REFUSED.add(1.0, &[]).map(|_| ()).map_err(Into::into),
            Some("metric_declare refused_total: ERR_DENIED")),
    ];
    for (name, deny, call, want) in cases {
        // Each case on a thread of its own: its own fake host.
        let (name, deny, call, want) = (*name, *deny, *call, want.map(str::to_string));
        std::thread::spawn(move || {
            fake::reset();
            fake::cached("pods", "shop/web", &[]);
            state::set(b"k", b"v").unwrap();
            if let Some(d) = deny {
                fake::deny(d);
            }
            fake::event(1, 0, "pods", "shop", "web");
            let h = |_: &crate::Event| -> crate::Result { Ok(()) };
            fake::handle(h); // an export call: nothing kept from before
            let r = call();
            assert_eq!(r.err().map(|f| f.message), want, "{}", name);
            if want.as_deref().map_or(true, |w| !w.contains(' ')) {
                assert_eq!(last_call_error(), None, "{}: a miss or a conflict keeps no call", name);
            }
        })
        .join()
        .unwrap_or_else(|_| panic!("{} failed", name));
    }
    // Another code's ? does not take the kept call.
    fake::reset();
    fake::deny("cache");
    assert_eq!(cache::list("pods", "", "").unwrap_err(), Error::DENIED);
    assert_eq!(crate::Fail::from(Error::INVALID).message, "ERR_INVALID");
    assert_eq!(last_call_error().map(|c| c.to_string()).as_deref(), Some("cache_list pods: ERR_DENIED"));
}

// cache::list evaluates label selectors as the host does, for the
// equality and set-based forms: on objects cached as JSON or as fields.
#[test]
fn cache_list_label_selectors() {
    fake::reset();
    fake::cached_json("svcs", r#"{"metadata":{"name":"web","namespace":"a","labels":{"app":"web","tier":"front"}}}"#);
    fake::cached_json("svcs", r#"{"metadata":{"name":"db","namespace":"a","labels":{"app":"db","example.com/x":"1"}}}"#);
    fake::cached_json("svcs", r#"{"metadata":{"name":"bare","namespace":"b"}}"#);
    fake::cached("svcs", "b/fields", &[("metadata.labels.app", 1, "web")]);
    for (sel, want) in [
        ("app=web", vec!["a/web", "b/fields"]),
        ("app==web", vec!["a/web", "b/fields"]),
        ("app!=web", vec!["a/db", "b/bare"]),
        ("app in (web, db)", vec!["a/db", "a/web", "b/fields"]),
        ("app notin (web)", vec!["a/db", "b/bare"]),
        ("tier", vec!["a/web"]),
        ("!tier", vec!["a/db", "b/bare", "b/fields"]),
        ("app=web,tier=front", vec!["a/web"]),
        ("example.com/x=1", vec!["a/db"]),
    ] {
        assert_eq!(cache::list("svcs", "", sel).unwrap(), want, "selector {:?}", sel);
    }
    assert_eq!(cache::list("svcs", "a", "app in (web,db)").unwrap(), vec!["a/db", "a/web"]);
    for bad in ["app in web", "a b", "=x", "app=a b", "app=x,,tier"] {
        assert_eq!(cache::list("svcs", "", bad).err(), Some(crate::Error::INVALID), "selector {:?}", bad);
    }
}

// A cached object reads whole as JSON (Object::json), as cached, after a
// write, and built from the fields `cached` was given.
#[test]
fn cached_object_json() {
    use crate::writes;
    fake::reset();
    let cm = r#"{"data":{"a":"1"},"metadata":{"name":"x","namespace":"demo"},"n":2,"t":true}"#;
    fake::cached_json("configmaps", cm);
    let o = cache::get("configmaps", "demo", "x").unwrap().unwrap();
    assert_eq!(String::from_utf8(o.json().unwrap()).unwrap(), cm);
    let x = writes::Target { resource: "configmaps", namespace: "demo", name: "x", ..Default::default() };
    let w = writes::merge_patch(&x, br#"{"data":{"b":"2"}}"#, &writes::Preconditions::default()).unwrap();
    let want = r#"{"data":{"a":"1","b":"2"},"metadata":{"name":"x","namespace":"demo","resourceVersion":"1"},"n":2,"t":true}"#;
    assert_eq!(String::from_utf8(w.json().unwrap()).unwrap(), want);
    fake::cached("pods", "shop/web", &[("metadata.name", 1, "web"), ("spec.replicas", 2, "3"), ("metadata.labels[\"a.b/c\"]", 1, "v")]);
    let p = cache::get("pods", "shop", "web").unwrap().unwrap();
    assert_eq!(String::from_utf8(p.json().unwrap()).unwrap(), r#"{"metadata":{"labels":{"a.b/c":"v"},"name":"web"},"spec":{"replicas":3}}"#);
}

// A write keeps the object's object-valued fields readable, old and new.
#[test]
fn write_keeps_object_fields() {
    use crate::writes;
    fake::reset();
    fake::cached_json("configmaps", r#"{"metadata":{"name":"x","namespace":"demo","labels":{"k":"v"}},"data":{"a":"1"}}"#);
    let x = writes::Target { resource: "configmaps", namespace: "demo", name: "x", ..Default::default() };
    writes::merge_patch(&x, br#"{"data":{"b":"2"},"spec":{"s":{"t":1}}}"#, &writes::Preconditions::default()).unwrap();
    let c = cache::get("configmaps", "demo", "x").unwrap().unwrap();
    assert_eq!(c.get("data").as_deref(), Some(r#"{"a":"1","b":"2"}"#));
    assert_eq!(c.get("metadata.labels").as_deref(), Some(r#"{"k":"v"}"#));
    assert_eq!(c.get("spec.s").as_deref(), Some(r#"{"t":1}"#));
}

// fake::synced calls an ih_synced handler for a resource, as the host
// does once the binding's initial list is handled.
#[test]
fn synced_delivered() {
    fake::reset();
    fn on_synced(h: &crate::Header) {
        crate::info!("synced {}", h.resource_name());
    }
    fake::synced(on_synced, "pods");
    assert_eq!(fake::logs(), vec![(crate::Level::Info as i32, "synced pods".to_string())]);
}
