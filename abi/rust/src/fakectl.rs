// The fake host's controller loop (section 18): [`Controller`] runs a
// plugin's reconcile offline the way the host does, over the fake
// cache as the object store: it ensures the finalizer before the first
// call of a live object, sets the header flags (absent, deleting,
// initial), applies the children the plugin wants into the cache (with
// the controller ownerReference and the host's bookkeeping label and
// annotation) and prunes those no longer wanted, writes the status
// (conditions' observedGeneration and lastTransitionTime filled in as
// the host does), keeps requeue-after timers on a fake clock
// ([`Controller::advance`] fires those due), removes the finalizer
// after an OK answer for a deleting object (which the fake apiserver
// then deletes) and prunes every child of an absent key.
//
// Per-child failures are programmed with [`Controller::fail_child`];
// the three imports answer `ERR_NO_EVENT` outside a reconcile, as the
// host's do. Server-side apply is approximated as in `apply_write`: a
// merge, so a field the plugin stops sending stays.

use super::{apply_write, fields_of, value_of, with, WriteRequest, ROOT};
use crate::header::{FLAG_ABSENT, FLAG_DELETING, FLAG_INITIAL_LIST};
use crate::json::{self, object, Value};
use crate::reconcile::{Outcome, Request};
use crate::Header;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The host's bookkeeping on every child it applies (design of
/// controller writes): which plugin, and which primary it is for.
pub const PLUGIN_LABEL: &str = "controller.informer-host.io/plugin";
pub const OWNER_ANNOTATION: &str = "controller.informer-host.io/owner";
/// The plugin's name in the fake's bookkeeping label.
pub const FAKE_PLUGIN: &str = "fake";

/// A child as the fake keeps it: its resource and store key.
type ChildKey = (String, String);

#[derive(Default)]
struct Ctl {
    /// The primary of the reconcile under way: (resource, namespace, name).
    current: Option<(String, String, String)>,
    requeue: Option<i64>,
    owns: BTreeMap<String, String>, // kind -> resource
    children: BTreeMap<String, BTreeSet<ChildKey>>, // primary key -> children applied
    failures: BTreeMap<(String, String), String>, // (kind, key) -> error
    applied: Vec<String>,
    pruned: Vec<String>,
    statuses: Vec<String>,
    now_ms: i64,
}

thread_local!(static CTL: RefCell<Ctl> = RefCell::new(Ctl::default()));

fn ctl<T>(f: impl FnOnce(&mut Ctl) -> T) -> T {
    CTL.with(|c| f(&mut c.borrow_mut()))
}

/// A reconcile is under way (object_read(0) of an absent key is then
/// ERR_ABSENT, as the host answers).
pub(super) fn reconciling() -> bool {
    ctl(|c| c.current.is_some())
}

fn key(ns: &str, name: &str) -> String {
    if ns.is_empty() {
        name.to_string()
    } else {
        format!("{}/{}", ns, name)
    }
}

fn load(resource: &str, key: &str) -> Option<Value> {
    with(|h| h.cache.get(&(resource.to_string(), key.to_string())).map(value_of))
}

fn store(resource: &str, key: &str, v: &Value) {
    with(|h| h.cache.insert((resource.to_string(), key.to_string()), fields_of(v)));
}

fn remove(resource: &str, key: &str) -> bool {
    with(|h| h.cache.remove(&(resource.to_string(), key.to_string())).is_some())
}

fn text_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(x) => cur = x,
            None => return "",
        }
    }
    cur.as_str().unwrap_or("")
}

fn finalizers(v: &Value) -> Vec<String> {
    match v.get("metadata").and_then(|m| m.get("finalizers")) {
        Some(Value::Array(a)) => a.iter().filter_map(|f| f.as_str().map(str::to_string)).collect(),
        _ => Vec::new(),
    }
}

fn set_finalizers(v: &mut Value, f: &[String]) {
    let mut meta = v.get("metadata").cloned().unwrap_or(Value::Null);
    meta.set("finalizers", Value::Array(f.iter().map(Value::from).collect()));
    v.set("metadata", meta);
}

/// RFC 3339 (UTC, seconds) of Unix milliseconds: the fake clock's time.
pub fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", y, m, d, rem / 3600, rem % 3600 / 60, rem % 60)
}

/// The fake clock's start: 2026-01-01T00:00:00Z.
pub const CLOCK_START_MS: i64 = 1_767_225_600_000;

/// A controller-mode plugin under test: `resource` is the `for`
/// resource (objects seeded with [`super::cached_json`]), `f` the
/// plugin's reconcile function.
pub struct Controller {
    resource: String,
    f: fn(&Request) -> crate::Result<Outcome>,
    finalizer: String,
    timers: BTreeMap<String, i64>,
}

impl Controller {
    /// A new controller over a fresh loop (no children applied, the
    /// clock at [`CLOCK_START_MS`]); the cache is left as seeded.
    pub fn new(resource: &str, f: fn(&Request) -> crate::Result<Outcome>) -> Controller {
        ctl(|c| *c = Ctl { now_ms: CLOCK_START_MS, ..Ctl::default() });
        Controller { resource: resource.to_string(), f, finalizer: String::new(), timers: BTreeMap::new() }
    }
    /// controller.owns: children of `kind` are objects of `resource`
    /// (in the fake cache); any other kind is ERR_DENIED.
    pub fn owns(self, resource: &str, kind: &str) -> Controller {
        ctl(|c| c.owns.insert(kind.to_string(), resource.to_string()));
        self
    }
    /// controller.finalizer.
    pub fn finalizer(mut self, name: &str) -> Controller {
        self.finalizer = name.to_string();
        self
    }

    /// One reconcile of namespace/name as the host makes it; the code
    /// and the set_error message.
    pub fn reconcile(&mut self, namespace: &str, name: &str) -> (i32, String) {
        self.call(namespace, name, 0)
    }
    /// A reconcile of the replay after a (re)start (flag initial).
    pub fn reconcile_initial(&mut self, namespace: &str, name: &str) -> (i32, String) {
        self.call(namespace, name, FLAG_INITIAL_LIST)
    }
    /// The replay after a (re)start: every cached primary, in key order.
    pub fn reconcile_all(&mut self) -> Vec<(String, i32, String)> {
        let keys: Vec<String> = with(|h| h.cache.keys().filter(|(r, _)| *r == self.resource).map(|(_, k)| k.clone()).collect());
        keys.into_iter()
            .map(|k| {
                let (ns, name) = k.split_once('/').unwrap_or(("", &k));
                let (code, msg) = self.call(ns, name, FLAG_INITIAL_LIST);
                (k.clone(), code, msg)
            })
            .collect()
    }

    /// Moves the fake clock on by `d` and reconciles, in due order, every
    /// key whose requeue-after fell due.
    pub fn advance(&mut self, d: Duration) -> Vec<(String, i32, String)> {
        let now = ctl(|c| {
            c.now_ms += d.as_millis() as i64;
            c.now_ms
        });
        let mut due: Vec<(i64, String)> = self.timers.iter().filter(|(_, at)| **at <= now).map(|(k, at)| (*at, k.clone())).collect();
        due.sort();
        due.into_iter()
            .map(|(_, k)| {
                self.timers.remove(&k);
                let (ns, name) = k.split_once('/').unwrap_or(("", &k));
                let (code, msg) = self.call(ns, name, 0);
                (k.clone(), code, msg)
            })
            .collect()
    }
    /// The key's pending requeue: how long until it fires.
    pub fn requeue_after(&self, namespace: &str, name: &str) -> Option<Duration> {
        let now = ctl(|c| c.now_ms);
        self.timers.get(&key(namespace, name)).map(|at| Duration::from_millis((at - now).max(0) as u64))
    }
    /// The fake clock, RFC 3339.
    pub fn now(&self) -> String {
        rfc3339(ctl(|c| c.now_ms))
    }

    /// A user's delete of the primary: with finalizers the object gets a
    /// deletionTimestamp and stays (the next reconcile is deleting),
    /// without it is gone.
    pub fn delete(&mut self, namespace: &str, name: &str) {
        let k = key(namespace, name);
        if let Some(mut v) = load(&self.resource, &k) {
            if finalizers(&v).is_empty() {
                remove(&self.resource, &k);
            } else {
                let mut meta = v.get("metadata").cloned().unwrap_or(Value::Null);
                meta.set("deletionTimestamp", self.now());
                v.set("metadata", meta);
                store(&self.resource, &k, &v);
            }
        }
    }

    /// The children the host applied for the primary and has not pruned,
    /// as "resource namespace/name", sorted.
    pub fn children(&self, namespace: &str, name: &str) -> Vec<String> {
        ctl(|c| c.children.get(&key(namespace, name)).map(|s| s.iter().map(|(r, k)| format!("{} {}", r, k)).collect()).unwrap_or_default())
    }
    /// From now on children_apply fails the child `kind` `key`
    /// ("namespace/name") with `error` (empty: it applies again).
    pub fn fail_child(&mut self, kind: &str, key: &str, error: &str) {
        ctl(|c| {
            let k = (kind.to_string(), key.to_string());
            if error.is_empty() {
                c.failures.remove(&k);
            } else {
                c.failures.insert(k, error.to_string());
            }
        });
    }
    /// The children the last call applied and pruned, as "resource
    /// namespace/name", in order.
    pub fn applied(&self) -> Vec<String> {
        ctl(|c| c.applied.clone())
    }
    pub fn pruned(&self) -> Vec<String> {
        ctl(|c| c.pruned.clone())
    }
    /// The status bodies the last call applied, with the conditions'
    /// times and generation as the host filled them in.
    pub fn statuses(&self) -> Vec<String> {
        ctl(|c| c.statuses.clone())
    }

    fn call(&mut self, namespace: &str, name: &str, extra: u8) -> (i32, String) {
        let k = key(namespace, name);
        let mut obj = load(&self.resource, &k);
        let deleting = obj.as_ref().map_or(false, |v| !text_at(v, &["metadata", "deletionTimestamp"]).is_empty());
        if let Some(v) = obj.as_mut() {
            let mut f = finalizers(v);
            if !deleting && !self.finalizer.is_empty() && !f.contains(&self.finalizer) {
                f.push(self.finalizer.clone());
                set_finalizers(v, &f);
                store(&self.resource, &k, v);
            }
        }
        let flags = extra | if obj.is_none() { FLAG_ABSENT } else { 0 } | if deleting { FLAG_DELETING } else { 0 };
        let (kind, api_version, uid, rv) = match &obj {
            Some(v) => (
                text_at(v, &["kind"]).to_string(),
                text_at(v, &["apiVersion"]).to_string(),
                text_at(v, &["metadata", "uid"]).to_string(),
                text_at(v, &["metadata", "resourceVersion"]).to_string(),
            ),
            None => Default::default(),
        };
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
        let header = Header::build(4, flags, [&self.resource, group, version, &self.resource, &kind, namespace, name, &uid, &rv]);
        let len = header.len() as i32;
        super::reset();
        with(|h| {
            h.header = Some(header);
            if let Some(v) = &obj {
                h.objects[0] = Some(v.to_string());
                for (p, f) in fields_of(v) {
                    if p != ROOT {
                        h.fields.insert((0, p), f);
                    }
                }
            }
        });
        ctl(|c| {
            c.current = Some((self.resource.clone(), namespace.to_string(), name.to_string()));
            c.requeue = None;
            c.applied.clear();
            c.pruned.clear();
            c.statuses.clear();
        });
        let code = crate::reconcile::export(len, self.f);
        let requeue = ctl(|c| {
            c.current = None;
            c.requeue.take()
        });
        with(|h| h.header = None);
        if code == 0 {
            match requeue {
                Some(ms) if ms > 0 => {
                    self.timers.insert(k.clone(), ctl(|c| c.now_ms) + ms);
                }
                _ => {
                    self.timers.remove(&k);
                }
            }
            if obj.is_none() {
                prune(&k, &BTreeSet::new());
            } else if deleting && !self.finalizer.is_empty() {
                if let Some(mut v) = load(&self.resource, &k) {
                    let f: Vec<String> = finalizers(&v).into_iter().filter(|f| *f != self.finalizer).collect();
                    if f.is_empty() {
                        remove(&self.resource, &k);
                    } else {
                        set_finalizers(&mut v, &f);
                        store(&self.resource, &k, &v);
                    }
                }
            }
        } else if code == 2 {
            self.timers.remove(&k);
        }
        (code, super::error_message())
    }
}

/// Deletes the children applied for primary `k` that are not in `keep`.
fn prune(k: &str, keep: &BTreeSet<ChildKey>) {
    let before = ctl(|c| c.children.get(k).cloned().unwrap_or_default());
    for (res, ck) in before.difference(keep) {
        remove(res, ck);
        ctl(|c| c.pruned.push(format!("{} {}", res, ck)));
    }
    ctl(|c| {
        if keep.is_empty() {
            c.children.remove(k);
        } else {
            c.children.insert(k.to_string(), keep.clone());
        }
    });
}

fn set_result(m: String) {
    with(|h| h.result = m);
}

/// children_apply over the fake cache.
pub(super) fn children_apply(body: &[u8]) -> i32 {
    set_result(String::new());
    let (res, ns, name) = match ctl(|c| c.current.clone()) {
        Some(cur) => cur,
        None => return -6,
    };
    let invalid = |m: String| {
        set_result(m);
        -5
    };
    let items = match json::parse(body) {
        Ok(Value::Array(a)) => a,
        _ => return invalid("children_apply: the body is not a JSON array".to_string()),
    };
    let primary = load(&res, &key(&ns, &name));
    let mut wanted = Vec::new();
    for (i, child) in items.iter().enumerate() {
        let (api, kind, cname) = (text_at(child, &["apiVersion"]), text_at(child, &["kind"]), text_at(child, &["metadata", "name"]));
        if api.is_empty() || kind.is_empty() || cname.is_empty() {
            return invalid(format!("children_apply: child {} has no apiVersion, kind or metadata.name", i));
        }
        let cres = match ctl(|c| c.owns.get(kind).cloned()) {
            Some(r) => r,
            None => {
                set_result(format!("children_apply: {} is not of a resource in controller.owns", kind));
                return -8;
            }
        };
        let cns = match text_at(child, &["metadata", "namespace"]) {
            "" => ns.clone(),
            n => n.to_string(),
        };
        wanted.push((cres, kind.to_string(), cns, cname.to_string(), child.clone()));
    }
    let mut lines = Vec::new();
    let mut keep = BTreeSet::new();
    for (cres, kind, cns, cname, mut child) in wanted {
        let ck = key(&cns, &cname);
        keep.insert((cres.clone(), ck.clone()));
        if let Some(e) = ctl(|c| c.failures.get(&(kind.clone(), ck.clone())).cloned()) {
            lines.push(format!("{} {}: {}", kind, ck, e));
            continue;
        }
        let uid = primary.as_ref().map_or("", |p| text_at(p, &["metadata", "uid"])).to_string();
        let mut meta = child.get("metadata").cloned().unwrap_or(Value::Null);
        let mut labels = meta.get("labels").cloned().unwrap_or(Value::Null);
        labels.set(PLUGIN_LABEL, FAKE_PLUGIN);
        meta.set("labels", labels);
        let mut ann = meta.get("annotations").cloned().unwrap_or(Value::Null);
        ann.set(OWNER_ANNOTATION, format!("{}/{}/{}/{}", res, ns, name, uid));
        meta.set("annotations", ann);
        if let Some(p) = &primary {
            if cns == ns || ns.is_empty() {
                meta.set("ownerReferences", Value::Array(vec![object([
                    ("apiVersion", text_at(p, &["apiVersion"]).into()),
                    ("kind", text_at(p, &["kind"]).into()),
                    ("name", name.as_str().into()),
                    ("uid", uid.as_str().into()),
                    ("controller", true.into()),
                    ("blockOwnerDeletion", true.into()),
                ])]));
            }
        }
        child.set("metadata", meta);
        let w = WriteRequest { op: "apply", resource: cres.clone(), namespace: cns.clone(), name: cname.clone(), body: child.to_string(), force: true, ..WriteRequest::default() };
        let (code, msg) = apply_write(&w);
        if code < 0 {
            lines.push(format!("{} {}: {}", kind, ck, msg));
            continue;
        }
        ctl(|c| c.applied.push(format!("{} {}", cres, ck)));
    }
    prune(&key(&ns, &name), &keep);
    set_result(lines.join("\n"));
    lines.len() as i32
}

/// status_apply over the fake cache: the conditions' observedGeneration
/// and lastTransitionTime filled in as the host does.
pub(super) fn status_apply(body: &[u8]) -> i32 {
    set_result(String::new());
    let (res, ns, name) = match ctl(|c| c.current.clone()) {
        Some(cur) => cur,
        None => return -6,
    };
    let k = key(&ns, &name);
    let mut status = match json::parse(body) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            set_result("status_apply: the body is not a JSON object".to_string());
            return -5;
        }
    };
    let mut v = match load(&res, &k) {
        Some(v) => v,
        None => return -1,
    };
    let generation = v.get("metadata").and_then(|m| m.get("generation")).cloned();
    let old = v.get("status").and_then(|s| s.get("conditions")).cloned();
    if let Some(conds) = status.get("conditions").cloned() {
        let list = match conds {
            Value::Array(a) => a,
            _ => {
                set_result("status_apply: conditions is not an array".to_string());
                return -5;
            }
        };
        let now = rfc3339(ctl(|c| c.now_ms));
        let mut out = Vec::new();
        for (i, mut c) in list.into_iter().enumerate() {
            let (t, s) = (text_at(&c, &["type"]).to_string(), text_at(&c, &["status"]).to_string());
            if t.is_empty() || !["True", "False", "Unknown"].contains(&s.as_str()) {
                set_result(format!("status_apply: condition {} needs a type and a status of True, False or Unknown", i));
                return -5;
            }
            let was = match &old {
                Some(Value::Array(a)) => a.iter().find(|o| text_at(o, &["type"]) == t).cloned(),
                _ => None,
            };
            let since = match was {
                Some(w) if text_at(&w, &["status"]) == s && !text_at(&w, &["lastTransitionTime"]).is_empty() => text_at(&w, &["lastTransitionTime"]).to_string(),
                _ => now.clone(),
            };
            c.set("lastTransitionTime", since);
            if let Some(g) = &generation {
                c.set("observedGeneration", g.clone());
            }
            out.push(c);
        }
        status.set("conditions", Value::Array(out));
    }
    let mut st = v.get("status").cloned().unwrap_or(Value::Null);
    if let Value::Object(m) = &status {
        for (f, x) in m {
            st.set(f, x.clone());
        }
    }
    v.set("status", st);
    store(&res, &k, &v);
    ctl(|c| c.statuses.push(status.to_string()));
    0
}

/// reconcile_requeue_after: 0 clears, negative or over 366 days invalid.
pub(super) fn requeue_after(ms: i64) -> i32 {
    if !reconciling() {
        return -6;
    }
    if !(0..=366 * 86_400_000).contains(&ms) {
        return -5;
    }
    ctl(|c| c.requeue = Some(ms));
    0
}
