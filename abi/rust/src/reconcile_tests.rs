// Controller mode through the kit and the fake host's loop (fakectl.rs).
use crate::fake::{self, Controller};
use crate::json::{self, object, Value};
use crate::reconcile::{self, Children, Condition, Outcome, Request, Status};
use std::time::Duration;

/// A widget wants spec.replicas ConfigMaps named <name>-<i>, reports
/// them in status, and asks to be looked at again after spec.every
/// seconds; a deleting or absent widget wants none.
fn widgets(req: &Request) -> crate::Result<Outcome> {
    let mut children = Children::new();
    let obj = match req.object()? {
        Some(o) if !req.deleting() => o,
        _ => return Ok(Outcome::new().children(children)),
    };
    if req.get("spec.fail").as_deref() == Some("true") {
        return Err(crate::Fail::retry("spec.fail is set"));
    }
    let n = obj.get("spec").and_then(|s| s.get("replicas")).and_then(Value::as_i64).unwrap_or(0);
    for i in 0..n {
        children.add(object([
            ("apiVersion", "v1".into()),
            ("kind", "ConfigMap".into()),
            ("metadata", object([("name", format!("{}-{}", req.name(), i).into())])),
            ("data", object([("index", i.to_string().into())])),
        ]));
    }
    let mut status = Status::new();
    status.set("replicas", n);
    let ready = if n > 0 { "True" } else { "False" };
    status.set_condition(Condition::new("Ready", ready, "Applied", &format!("{} config maps", n)));
    let every = req.get("spec.every").and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok(Outcome::new().children(children).status(status).requeue_after(Duration::from_secs(every)))
}

fn widget(name: &str, replicas: i64, extra: &str) -> String {
    format!(r#"{{"apiVersion":"example.com/v1","kind":"Widget","metadata":{{"namespace":"shop","name":"{}","uid":"uid-{}","generation":3}},"spec":{{"replicas":{}{}}}}}"#, name, name, replicas, extra)
}

fn cached(resource: &str, key: &str) -> Option<Value> {
    let (ns, name) = key.split_once('/').unwrap();
    crate::cache::get(resource, ns, name).ok().flatten().and_then(|o| o.json().ok()).and_then(|b| json::parse(&b).ok())
}

/// A user's change of the cached object (its status and metadata kept).
fn edit(resource: &str, key: &str, f: impl FnOnce(&mut Value)) {
    let mut v = cached(resource, key).unwrap();
    f(&mut v);
    fake::cached_json(resource, &v.to_string());
}

fn spec(replicas: i64, every: i64, generation: i64) -> impl FnOnce(&mut Value) {
    move |v| {
        let mut s = v.get("spec").cloned().unwrap();
        s.set("replicas", replicas).set("every", every);
        v.set("spec", s);
        let mut m = v.get("metadata").cloned().unwrap();
        m.set("generation", generation);
        v.set("metadata", m);
    }
}

fn text(v: &Value, path: &[&str]) -> String {
    let mut cur = v;
    for p in path {
        cur = match p.parse::<usize>() {
            Ok(i) => cur.at(i),
            Err(_) => cur.get(p),
        }
        .unwrap_or(&Value::Null);
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        v => v.to_string(),
    }
}

#[test]
fn children_applied_status_written_then_pruned_on_scale_down() {
    fake::reset();
    fake::cached_json("widgets", &widget("w", 3, ""));
    let mut c = Controller::new("widgets", widgets).owns("configmaps", "ConfigMap").finalizer("example.com/cleanup");
    assert_eq!(c.reconcile("shop", "w"), (0, String::new()));
    assert_eq!(c.children("shop", "w"), vec!["configmaps shop/w-0", "configmaps shop/w-1", "configmaps shop/w-2"]);
    let cm = cached("configmaps", "shop/w-1").expect("the child is in the store");
    assert_eq!(text(&cm, &["data", "index"]), "1");
    assert_eq!(text(&cm, &["metadata", "ownerReferences", "0", "uid"]), "uid-w");
    assert_eq!(text(&cm, &["metadata", "ownerReferences", "0", "controller"]), "true");
    assert_eq!(text(&cm, &["metadata", "labels", fake::PLUGIN_LABEL]), fake::FAKE_PLUGIN);
    assert_eq!(text(&cm, &["metadata", "annotations", fake::OWNER_ANNOTATION]), "widgets/shop/w/uid-w");

    let w = cached("widgets", "shop/w").unwrap();
    assert_eq!(text(&w, &["metadata", "finalizers"]), r#"["example.com/cleanup"]"#, "the host adds the finalizer before the first call");
    assert_eq!(text(&w, &["status", "replicas"]), "3");
    assert_eq!(text(&w, &["status", "conditions", "0", "status"]), "True");
    assert_eq!(text(&w, &["status", "conditions", "0", "observedGeneration"]), "3");
    assert_eq!(text(&w, &["status", "conditions", "0", "lastTransitionTime"]), "2026-01-01T00:00:00Z");
    assert_eq!(c.requeue_after("shop", "w"), None);

    // Scale down: the stale child goes; the condition's time is kept while its status is.
    edit("widgets", "shop/w", spec(1, 0, 4));
    c.advance(Duration::from_secs(5));
    assert_eq!(c.reconcile("shop", "w"), (0, String::new()));
    assert_eq!(c.pruned(), vec!["configmaps shop/w-1", "configmaps shop/w-2"]);
    assert_eq!(c.children("shop", "w"), vec!["configmaps shop/w-0"]);
    assert!(cached("configmaps", "shop/w-2").is_none());
    let w = cached("widgets", "shop/w").unwrap();
    assert_eq!(text(&w, &["status", "conditions", "0", "lastTransitionTime"]), "2026-01-01T00:00:00Z");
    assert_eq!(text(&w, &["status", "conditions", "0", "observedGeneration"]), "4");

    // Scale to zero: the condition turns, and its time with it.
    edit("widgets", "shop/w", spec(0, 0, 5));
    c.advance(Duration::from_secs(5));
    assert_eq!(c.reconcile("shop", "w"), (0, String::new()));
    assert!(c.children("shop", "w").is_empty());
    let w = cached("widgets", "shop/w").unwrap();
    assert_eq!(text(&w, &["status", "conditions", "0", "status"]), "False");
    assert_eq!(text(&w, &["status", "conditions", "0", "lastTransitionTime"]), "2026-01-01T00:00:10Z");
}

#[test]
fn requeue_after_fires_on_the_fake_clock() {
    fake::reset();
    fake::cached_json("widgets", &widget("w", 1, r#","every":30"#));
    let mut c = Controller::new("widgets", widgets).owns("configmaps", "ConfigMap");
    assert_eq!(c.reconcile("shop", "w").0, 0);
    assert_eq!(c.requeue_after("shop", "w"), Some(Duration::from_secs(30)));
    assert!(c.advance(Duration::from_secs(29)).is_empty());
    assert_eq!(c.advance(Duration::from_secs(1)), vec![("shop/w".to_string(), 0, String::new())]);
    assert_eq!(c.requeue_after("shop", "w"), Some(Duration::from_secs(30)), "the reconcile asked again");
    // A failed reconcile leaves the timer to the host's backoff; a later OK without requeue clears it.
    edit("widgets", "shop/w", spec(1, 0, 4));
    assert_eq!(c.reconcile("shop", "w").0, 0);
    assert_eq!(c.requeue_after("shop", "w"), None);
    assert!(c.advance(Duration::from_secs(3600)).is_empty());
}

#[test]
fn deleting_cleans_up_then_the_finalizer_goes() {
    fake::reset();
    fake::cached_json("widgets", &widget("w", 2, ""));
    let mut c = Controller::new("widgets", widgets).owns("configmaps", "ConfigMap").finalizer("example.com/cleanup");
    assert_eq!(c.reconcile("shop", "w").0, 0);
    c.delete("shop", "w");
    let w = cached("widgets", "shop/w").expect("the finalizer holds the object");
    assert_eq!(text(&w, &["metadata", "deletionTimestamp"]), "2026-01-01T00:00:00Z");
    assert_eq!(c.reconcile("shop", "w"), (0, String::new()));
    assert_eq!(c.pruned(), vec!["configmaps shop/w-0", "configmaps shop/w-1"]);
    assert!(cached("widgets", "shop/w").is_none(), "finalizer removed after OK: the object is gone");
    assert!(cached("configmaps", "shop/w-0").is_none());
}

#[test]
fn an_absent_key_prunes_every_child() {
    fake::reset();
    fake::cached_json("widgets", &widget("w", 2, ""));
    // Children left alone (None) by this reconciler for an absent key: the host prunes them all.
    fn leave(req: &Request) -> crate::Result<Outcome> {
        if req.exists() {
            return widgets(req);
        }
        assert_eq!(req.field("metadata.name"), Err(crate::Error::ABSENT));
        assert!(req.object()?.is_none());
        Ok(Outcome::new())
    }
    let mut c = Controller::new("widgets", leave).owns("configmaps", "ConfigMap");
    assert_eq!(c.reconcile("shop", "w").0, 0);
    crate::fake::cached_json("widgets", &widget("other", 0, ""));
    let mut keys = crate::cache::list("widgets", "shop", "").unwrap();
    keys.sort();
    assert_eq!(keys, vec!["shop/other", "shop/w"]);
    c.delete("shop", "w"); // no finalizer: gone at once
    assert_eq!(c.reconcile("shop", "w"), (0, String::new()));
    assert_eq!(c.pruned(), vec!["configmaps shop/w-0", "configmaps shop/w-1"]);
    assert!(c.children("shop", "w").is_empty());
}

#[test]
fn a_failed_child_fails_the_reconcile_and_names_it() {
    fake::reset();
    fake::cached_json("widgets", &widget("w", 3, ""));
    let mut c = Controller::new("widgets", widgets).owns("configmaps", "ConfigMap");
    c.fail_child("ConfigMap", "shop/w-1", "ERR_FORBIDDEN: configmaps is forbidden");
    let (code, msg) = c.reconcile("shop", "w");
    assert_eq!(code, 3);
    assert_eq!(msg, "children_apply: 1 of 3 children failed: ConfigMap shop/w-1: ERR_FORBIDDEN: configmaps is forbidden");
    assert_eq!(c.applied(), vec!["configmaps shop/w-0", "configmaps shop/w-2"]);
    assert_eq!(c.statuses().len(), 1, "the status is written even so");
    c.fail_child("ConfigMap", "shop/w-1", "");
    assert_eq!(c.reconcile("shop", "w"), (0, String::new()));
    assert_eq!(c.children("shop", "w").len(), 3);
}

#[test]
fn apply_children_gives_the_failures_to_the_plugin() {
    fake::reset();
    fake::cached_json("widgets", &widget("w", 0, ""));
    fn own(req: &Request) -> crate::Result<Outcome> {
        let mut c = Children::new();
        c.add(object([("apiVersion", "v1".into()), ("kind", "ConfigMap".into()), ("metadata", object([("name", "a".into())]))]));
        c.add(object([("apiVersion", "v1".into()), ("kind", "ConfigMap".into()), ("metadata", object([("name", "b".into())]))]));
        let f = reconcile::apply_children(&c)?;
        let mut s = Status::new();
        match f.lines.first() {
            Some(l) => s.set_condition(Condition::new("Ready", "False", "ChildFailed", l)),
            None => s.set_condition(Condition::new("Ready", "True", "Applied", "")),
        };
        reconcile::apply_status(&s)?;
        crate::info!("{} {}", req.key(), f.count);
        Ok(Outcome::new())
    }
    let mut c = Controller::new("widgets", own).owns("configmaps", "ConfigMap");
    c.fail_child("ConfigMap", "shop/b", "ERR_UNPROCESSABLE: spec: Invalid value");
    assert_eq!(c.reconcile("shop", "w"), (0, String::new()));
    let w = cached("widgets", "shop/w").unwrap();
    assert_eq!(text(&w, &["status", "conditions", "0", "message"]), "ConfigMap shop/b: ERR_UNPROCESSABLE: spec: Invalid value");
    assert_eq!(fake::logs(), vec![(1, "shop/w 1".to_string())]);
}

#[test]
fn the_host_refuses_bad_sets_and_calls_outside_a_reconcile() {
    fake::reset();
    fake::cached_json("widgets", &widget("w", 0, ""));
    fn bad(req: &Request) -> crate::Result<Outcome> {
        let mut c = Children::new();
        c.add(object([("apiVersion", "v1".into()), ("kind", req.name().into()), ("metadata", object([("name", "x".into())]))]));
        Ok(Outcome::new().children(c))
    }
    let mut c = Controller::new("widgets", bad).owns("configmaps", "ConfigMap");
    let (code, msg) = c.reconcile("shop", "w");
    assert_eq!(code, 3);
    assert_eq!(msg, "children_apply 1 children: ERR_DENIED: children_apply: w is not of a resource in controller.owns");
    let mut s = Status::new();
    s.set_condition(Condition::new("Ready", "Maybe", "", ""));
    fn maybe(_: &Request) -> crate::Result<Outcome> {
        let mut s = Status::new();
        s.set_condition(Condition::new("Ready", "Maybe", "", ""));
        Ok(Outcome::new().status(s))
    }
    let mut c = Controller::new("widgets", maybe);
    assert_eq!(c.reconcile("shop", "w"), (3, "status_apply: ERR_INVALID: status_apply: condition 0 needs a type and a status of True, False or Unknown".to_string()));
    // Outside ih_reconcile the imports answer ERR_NO_EVENT.
    assert_eq!(reconcile::apply_status(&s).unwrap_err().code, crate::Error::NO_EVENT);
    assert_eq!(reconcile::apply_children(&Children::new()).unwrap_err().code, crate::Error::NO_EVENT);
    assert_eq!(reconcile::requeue_after(Duration::from_secs(1)), Err(crate::Error::NO_EVENT));
    fn far(_: &Request) -> crate::Result<Outcome> {
        Ok(Outcome::new().requeue_after(Duration::from_secs(367 * 86400)))
    }
    let mut c = Controller::new("widgets", far);
    assert_eq!(c.reconcile("shop", "w").0, 3);
}

#[test]
fn retry_and_drop_answer_as_a_handler_does() {
    fake::reset();
    fake::cached_json("widgets", &widget("w", 1, r#","fail":true"#));
    let mut c = Controller::new("widgets", widgets).owns("configmaps", "ConfigMap");
    assert_eq!(c.reconcile("shop", "w"), (1, "spec.fail is set".to_string()));
    assert!(c.children("shop", "w").is_empty());
    fn drop(_: &Request) -> crate::Result<Outcome> {
        Err(crate::Fail::drop("not mine"))
    }
    let mut c = Controller::new("widgets", drop);
    assert_eq!(c.reconcile_initial("shop", "w"), (2, "not mine".to_string()));
}

#[test]
fn the_request_carries_the_flags_and_the_builders_write_json() {
    fake::reset();
    fake::cached_json("widgets", &widget("w", 0, ""));
    fn look(req: &Request) -> crate::Result<Outcome> {
        crate::info!("{} {} exists={} deleting={} initial={} kind={}", req.header().event_type(), req.key(), req.exists(), req.deleting(), req.initial(), req.header().kind());
        Ok(Outcome::new())
    }
    let mut c = Controller::new("widgets", look);
    c.reconcile_all();
    assert_eq!(fake::logs(), vec![(1, "reconcile shop/w exists=true deleting=false initial=true kind=Widget".to_string())]);
    let mut s = Status::new();
    s.set("phase", "Running").set_condition(Condition::new("Ready", "True", "Up", "")).set_condition(Condition::new("Ready", "False", "Down", "x"));
    assert_eq!(s.to_json(), r#"{"conditions":[{"message":"x","reason":"Down","status":"False","type":"Ready"}],"phase":"Running"}"#);
    assert_eq!(Children::new().to_json(), "[]");
    assert_eq!(fake::rfc3339(fake::CLOCK_START_MS + 86_400_000 * 59 + 3_723_000), "2026-03-01T01:02:03Z");
    let mut v = Value::Null;
    v.set("a", 1).set("b", Some("x")).set("c", None::<&str>);
    assert_eq!(v.to_string(), r#"{"a":1,"b":"x","c":null}"#);
}

#[test]
fn a_failed_outcome_still_writes_its_status_and_a_gone_primary_skips_it() {
    fake::reset();
    fake::cached_json("widgets", &widget("w", 1, ""));
    fn failing(_: &Request) -> crate::Result<Outcome> {
        let mut s = Status::new();
        s.set_condition(Condition::new("Ready", "False", "Waiting", "the database is not up"));
        let mut c = Children::new();
        c.add(object([("apiVersion", "v1".into()), ("kind", "ConfigMap".into()), ("metadata", object([("name", "x".into())]))]));
        Ok(Outcome::new().children(c).status(s).requeue_after(Duration::from_secs(5)).fail(crate::Fail::retry("database down")))
    }
    let mut c = Controller::new("widgets", failing).owns("configmaps", "ConfigMap");
    assert_eq!(c.reconcile("shop", "w"), (1, "database down".to_string()));
    assert!(c.applied().is_empty(), "a failed reconcile's children are not applied");
    assert_eq!(text(&cached("widgets", "shop/w").unwrap(), &["status", "conditions", "0", "reason"]), "Waiting");
    assert_eq!(c.requeue_after("shop", "w"), None);

    // The primary gone: the status is skipped, the answer OK.
    fn status_only(_: &Request) -> crate::Result<Outcome> {
        let mut s = Status::new();
        s.set("phase", "Gone");
        Ok(Outcome::new().status(s).requeue_after(Duration::from_micros(10)))
    }
    let mut c = Controller::new("widgets", status_only);
    assert_eq!(c.reconcile("shop", "nothing"), (0, String::new()));
    // Under a millisecond rounds up to one, not to zero (which clears).
    assert_eq!(c.reconcile("shop", "w"), (0, String::new()));
    assert_eq!(c.requeue_after("shop", "w"), Some(Duration::from_millis(1)));
}
