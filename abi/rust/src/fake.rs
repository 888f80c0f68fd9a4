//! An in-memory host for native unit tests of a plugin's logic (`rustc
//! --test` or `cargo test` on the machine's own target). Off wasm the
//! kit's imports are these functions: set an event up with [`event`],
//! [`field`], [`object`], call the handler through [`handle`], then look
//! at [`logs`], [`error_message`], [`state_value`], [`metric_updates`],
//! and, for capabilities II, [`writes`], [`events`], [`http_requests`],
//! each call recorded as the plugin made it. Answers are programmable:
//! [`on_write`] and [`on_http`] per call, [`answer`] for the next call,
//! [`http_response`] for every upstream. By default a write is applied to
//! the fake cache ([`apply_write`]), so a later `cache::get` sees it, as
//! controller-runtime's fake client does.
//! A cached object is kept whole (its JSON, which `Object::json` reads)
//! and as fields; a write merges into the JSON and every field is taken
//! from it again, objects' too. `cache::list` evaluates label selectors of
//! the equality (`k=v`, `k!=v`) and set-based (`k in (a,b)`,
//! `k notin (a,b)`, `k`, `!k`) forms; [`synced`] calls an `ih_synced`
//! handler. Every test thread has its own host. Cache lists come in pages
//! of 2 keys, so the kit's paging is exercised. [`Controller`] runs a
//! controller-mode plugin's reconcile as the host's loop does (section
//! 18): finalizer, children applied and pruned, status, requeue-after on
//! a fake clock. On wasm this module is empty.
#![cfg_attr(target_arch = "wasm32", allow(dead_code))]

#[cfg(not(target_arch = "wasm32"))]
pub use imp::*;

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use crate::{json, Event, Header, Result};

    // Its own file, but a child of imp: it works on the Host's internals.
    mod ctl {
        include!("fakectl.rs");
    }
    pub use ctl::{rfc3339, Controller, CLOCK_START_MS, FAKE_PLUGIN, OWNER_ANNOTATION, PLUGIN_LABEL};
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    /// A cached object's fields: path -> (kind, value) as field_read
    /// answers them.
    type Fields = BTreeMap<String, (u32, Vec<u8>)>;

    /// One k8s_write as the plugin made it.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct WriteRequest {
        /// "create", "merge-patch", "json-patch", "apply", "delete"
        /// (`writes::op_name`); "" for an unknown op.
        pub op: &'static str,
        pub resource: String,
        pub namespace: String,
        pub name: String,
        pub subresource: String,
        /// The JSON the plugin sent; "" for a delete.
        pub body: String,
        /// The preconditions ("" = none).
        pub uid: String,
        pub resource_version: String,
        pub force: bool,
        pub must_exist: bool,
    }

    /// One event_record the host accepted.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct RecordedEvent {
        /// The object's `which`: 0, 1 or a handle.
        pub which: i32,
        /// "Normal" or "Warning".
        pub event_type: &'static str,
        pub reason: String,
        pub message: String,
    }

    /// One http_request as the plugin made it.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct HttpRequest {
        pub upstream: String,
        pub method: String,
        pub path: String,
        /// The plugin's header lines as (name, value).
        pub header: Vec<(String, String)>,
        pub body: Vec<u8>,
    }

    /// What an upstream answers ([`on_http`]): a status (100..599) with
    /// a header ("Name: value\n" lines) and a body, or, with a negative
    /// `code`, that error and `message` as the result message.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct HttpResponse {
        pub status: i32,
        pub header: String,
        pub body: Vec<u8>,
        pub code: i32,
        pub message: String,
    }

    #[derive(Default)]
    struct Host {
        header: Option<Vec<u8>>,
        objects: [Option<String>; 2],
        fields: BTreeMap<(i32, String), (u32, Vec<u8>)>,
        config: Vec<u8>,
        logs: Vec<(i32, String)>,
        error: String,
        state: BTreeMap<Vec<u8>, (Vec<u8>, i64)>,
        next_version: i64,
        cache: BTreeMap<(String, String), Fields>, // (resource, key) -> fields
        handles: Vec<Fields>,                      // each the cache's state when it was got
        metrics: Vec<String>,
        updates: Vec<String>,
        // Capabilities II: the next call's failure, the result message,
        // what was asked, and the HTTP answer.
        answer: Option<(i32, String)>,
        result: String,
        writes: Vec<WriteRequest>,
        events: Vec<RecordedEvent>,
        http: Vec<HttpRequest>,
        response: Option<(i32, String, Vec<u8>)>,
        last_response: Option<HttpResponse>,
        on_write: Option<fn(&WriteRequest) -> (i32, String)>,
        upstreams: BTreeMap<String, fn(&HttpRequest) -> HttpResponse>,
        resource_version: u64,
        write_answer: Option<Fields>, // the object apply_write answered with
        denied: Vec<&'static str>,    // capabilities deny took away
        batch: Option<Batch>,         // the ih_handle_batch call handle_batch makes
    }

    /// The events of one ih_handle_batch call and what the plugin settled.
    #[derive(Default)]
    struct Batch {
        headers: Vec<Vec<u8>>,
        results: Vec<(i32, String)>,
        cur: Option<usize>,
    }

    thread_local!(static HOST: RefCell<Host> = RefCell::new(Host::default()));

    fn with<T>(f: impl FnOnce(&mut Host) -> T) -> T {
        HOST.with(|h| f(&mut h.borrow_mut()))
    }

    /// Forgets everything but the state and the cache (a new event).
    pub fn reset() {
        with(|h| {
            h.header = None;
            h.objects = [None, None];
            h.fields.clear();
            h.logs.clear();
            h.error.clear();
            h.handles.clear();
            h.result.clear();
            h.batch = None;
            h.writes.clear();
            h.events.clear();
            h.http.clear();
            h.last_response = None;
        })
    }

    /// The next capabilities II call (k8s_write, event_record,
    /// http_request) fails with `code` and `message` (result_message).
    pub fn answer(code: i32, message: &str) {
        with(|h| h.answer = Some((code, message.to_string())));
    }

    /// What http_request answers from now on, for every upstream without
    /// [`on_http`] (default 200, no header, no body); `header` is "Name:
    /// value\n" lines.
    pub fn http_response(status: i32, header: &str, body: &[u8]) {
        with(|h| h.response = Some((status, header.to_string(), body.to_vec())));
    }

    /// Programs the cluster: every later write that passes the host's
    /// checks is answered by `f` with (0, the object the apiserver
    /// answers, as JSON; ignored for a delete) or (a negative code, the
    /// apiserver's message). `f` may hand a write on to [`apply_write`].
    pub fn on_write(f: fn(&WriteRequest) -> (i32, String)) {
        with(|h| h.on_write = Some(f));
    }

    /// Programs `upstream`'s answers (over [`http_response`]).
    pub fn on_http(upstream: &str, f: fn(&HttpRequest) -> HttpResponse) {
        with(|h| h.upstreams.insert(upstream.to_string(), f));
    }

    /// The writes the plugin made, in order, including those refused. A
    /// successful write returns a handle to the object answered
    /// ([`apply_write`] by default), 0 for a delete.
    pub fn writes() -> Vec<WriteRequest> {
        with(|h| h.writes.clone())
    }
    /// The Events the host accepted.
    pub fn events() -> Vec<RecordedEvent> {
        with(|h| h.events.clone())
    }
    /// The HTTP requests the plugin sent (not those the host refused
    /// before sending: a path that would leave the base).
    pub fn http_requests() -> Vec<HttpRequest> {
        with(|h| h.http.clone())
    }

    /// An object of `resource` in the cache from its JSON, every field
    /// readable (`metadata.labels["app"]` or `metadata.labels.app`).
    pub fn cached_json(resource: &str, object: &str) {
        let v = json::parse(object.as_bytes()).expect("fake::cached_json: the object is not JSON");
        let key = key_of(&v, "");
        with(|h| h.cache.insert((resource.to_string(), key), fields_of(&v)));
    }

    /// The key of a cached object's whole JSON among its fields: no field
    /// path a plugin reads starts with NUL. object_read answers it, and
    /// writes and label selectors work on it, so that no field is lost.
    const ROOT: &str = "\0json";

    /// Every field of `v`, objects' and arrays' too, and `v` whole.
    fn fields_of(v: &json::Value) -> Fields {
        let mut f = Fields::new();
        flatten(v, "", true, &mut f);
        f.insert(ROOT.to_string(), (5, v.to_string().into_bytes()));
        f
    }

    /// The object the fields are of: its whole JSON, else (for an object
    /// [`cached`] as fields) built from the fields' paths.
    fn value_of(f: &Fields) -> json::Value {
        if let Some((_, b)) = f.get(ROOT) {
            if let Ok(v) = json::parse(b) {
                return v;
            }
        }
        let mut root = json::Value::Object(Vec::new());
        // Sorted paths put a parent before its members.
        for (path, (kind, b)) in f {
            let leaf = match kind {
                1 => json::Value::String(String::from_utf8_lossy(b).into_owned()),
                2 => {
                    let t = String::from_utf8_lossy(b).into_owned();
                    json::Value::Number(t.parse().unwrap_or(0.0), t)
                }
                3 => json::Value::Bool(b.as_slice() == b"true"),
                5 | 6 => json::parse(b).unwrap_or(json::Value::Null),
                _ => json::Value::Null,
            };
            if let Some(segs) = segments(path) {
                set_path(&mut root, &segs, leaf);
            }
        }
        root
    }

    enum Seg {
        Key(String),
        Index(usize),
    }

    /// A field path's steps: `a.b`, `a["b.c"]`, `a[0]`; None when it does
    /// not parse.
    fn segments(path: &str) -> Option<Vec<Seg>> {
        let b = path.as_bytes();
        let (mut i, mut out) = (0, Vec::new());
        while i < b.len() {
            match b[i] {
                b'.' => i += 1,
                b'[' if b.get(i + 1) == Some(&b'"') => {
                    let mut j = i + 2;
                    while j < b.len() && b[j] != b'"' {
                        j += if b[j] == b'\\' { 2 } else { 1 };
                    }
                    if b.get(j + 1) != Some(&b']') {
                        return None;
                    }
                    match json::parse(&b[i + 1..=j]) {
                        Ok(json::Value::String(k)) => out.push(Seg::Key(k)),
                        _ => return None,
                    }
                    i = j + 2;
                }
                b'[' => {
                    let j = i + path[i..].find(']')?;
                    out.push(Seg::Index(path[i + 1..j].parse().ok()?));
                    i = j + 1;
                }
                _ => {
                    let j = path[i..].find(|c| c == '.' || c == '[').map_or(b.len(), |n| i + n);
                    out.push(Seg::Key(path[i..j].to_string()));
                    i = j;
                }
            }
        }
        Some(out)
    }

    fn set_path(v: &mut json::Value, segs: &[Seg], leaf: json::Value) {
        let (first, rest) = match segs.split_first() {
            Some(x) => x,
            None => return *v = leaf,
        };
        let next = match first {
            Seg::Key(k) => {
                if !matches!(v, json::Value::Object(_)) {
                    *v = json::Value::Object(Vec::new());
                }
                let m = match v {
                    json::Value::Object(m) => m,
                    _ => unreachable!(),
                };
                let i = match m.iter().position(|(n, _)| n == k) {
                    Some(i) => i,
                    None => {
                        m.push((k.clone(), json::Value::Null));
                        m.len() - 1
                    }
                };
                &mut m[i].1
            }
            Seg::Index(n) => {
                if !matches!(v, json::Value::Array(_)) {
                    *v = json::Value::Array(Vec::new());
                }
                let a = match v {
                    json::Value::Array(a) => a,
                    _ => unreachable!(),
                };
                while a.len() <= *n {
                    a.push(json::Value::Null);
                }
                &mut a[*n]
            }
        };
        set_path(next, rest, leaf)
    }

    /// A JSON merge patch (RFC 7386): null removes a member.
    fn merge_value(target: &mut json::Value, patch: &json::Value) {
        let pm = match patch {
            json::Value::Object(pm) => pm,
            _ => return *target = patch.clone(),
        };
        if !matches!(target, json::Value::Object(_)) {
            *target = json::Value::Object(Vec::new());
        }
        let tm = match target {
            json::Value::Object(tm) => tm,
            _ => unreachable!(),
        };
        for (k, x) in pm {
            let at = tm.iter().position(|(n, _)| n == k);
            match (x, at) {
                (json::Value::Null, Some(i)) => {
                    tm.remove(i);
                }
                (json::Value::Null, None) => {}
                (_, Some(i)) => merge_value(&mut tm[i].1, x),
                (_, None) => {
                    let mut v = json::Value::Null;
                    merge_value(&mut v, x);
                    tm.push((k.clone(), v));
                }
            }
        }
    }

    /// The uids of the object's ownerReferences, for the owner index.
    fn owner_uids(f: &Fields) -> Vec<String> {
        match value_of(f).get("metadata").and_then(|m| m.get("ownerReferences")) {
            Some(json::Value::Array(a)) => a.iter().filter_map(|o| o.get("uid").and_then(|u| u.as_str()).map(str::to_string)).collect(),
            _ => Vec::new(),
        }
    }

    /// The object's labels, for label selectors.
    fn labels_of(f: &Fields) -> BTreeMap<String, String> {
        let v = value_of(f);
        let mut out = BTreeMap::new();
        if let Some(json::Value::Object(m)) = v.get("metadata").and_then(|m| m.get("labels")) {
            for (k, x) in m {
                if let json::Value::String(s) = x {
                    out.insert(k.clone(), s.clone());
                }
            }
        }
        out
    }

    /// One requirement of a label selector: the key, the operator ("=",
    /// "!=", "in", "notin", "exists", "!") and the values.
    struct Requirement {
        key: String,
        op: &'static str,
        values: Vec<String>,
    }

    /// Parses a label selector of the forms the host's (and Go's
    /// kittest's) take: `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
    /// `k notin (a,b)`, `k`, `!k`, joined by commas.
    fn parse_selector(s: &str) -> Option<Vec<Requirement>> {
        fn bad(t: &str) -> bool {
            t.contains(|c: char| " =!(),".contains(c))
        }
        fn key(k: &str) -> Option<String> {
            if k.is_empty() || bad(k) { None } else { Some(k.to_string()) }
        }
        let mut out = Vec::new();
        let mut rest = s.trim();
        while !rest.is_empty() {
            let mut depth = 0;
            let cut = rest
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        _ => {}
                    }
                    c == ',' && depth == 0
                })
                .map_or(rest.len(), |(i, _)| i);
            let part = rest[..cut].trim();
            rest = rest.get(cut + 1..).unwrap_or("").trim();
            if part.is_empty() {
                return None;
            }
            if let Some(k) = part.strip_prefix('!').filter(|k| !k.starts_with('=')) {
                out.push(Requirement { key: key(k.trim())?, op: "!", values: vec![] });
                continue;
            }
            if let Some((op, (k, v))) = ["!=", "==", "="].iter().find_map(|op| part.split_once(op).map(|kv| (*op, kv))) {
                let v = v.trim();
                if bad(v) {
                    return None;
                }
                out.push(Requirement { key: key(k.trim())?, op: if op == "==" { "=" } else { op }, values: vec![v.to_string()] });
                continue;
            }
            let words: Vec<&str> = part.split_whitespace().collect();
            if words.len() >= 2 && (words[1] == "in" || words[1] == "notin") {
                let set = part[words[0].len()..].trim_start()[words[1].len()..].trim();
                let inner = set.strip_prefix('(')?.strip_suffix(')')?;
                let op = if words[1] == "in" { "in" } else { "notin" };
                out.push(Requirement { key: key(words[0])?, op, values: inner.split(',').map(|v| v.trim().to_string()).collect() });
                continue;
            }
            out.push(Requirement { key: key(part)?, op: "exists", values: vec![] });
        }
        Some(out)
    }

    fn selector_matches(sel: &[Requirement], labels: &BTreeMap<String, String>) -> bool {
        sel.iter().all(|r| {
            let v = labels.get(&r.key);
            match r.op {
                "=" => v == Some(&r.values[0]),
                "!=" => v != Some(&r.values[0]),
                "in" => v.map_or(false, |v| r.values.contains(v)),
                "notin" => v.map_or(true, |v| !r.values.contains(v)),
                "exists" => v.is_some(),
                _ => v.is_none(),
            }
        })
    }

    /// The fields of the cached object `resource` `key`, as [`cached`],
    /// [`cached_json`] or a write left them.
    pub fn cached_fields(resource: &str, key: &str) -> Option<Vec<(String, u32, String)>> {
        with(|h| {
            h.cache.get(&(cache_resource(resource).to_string(), key.to_string())).map(|f| {
                f.iter().filter(|(p, _)| *p != ROOT).map(|(p, (k, v))| (p.clone(), *k, String::from_utf8_lossy(v).into_owned())).collect()
            })
        })
    }

    fn key_of(v: &json::Value, ns: &str) -> String {
        let m = v.get("metadata");
        let name = m.and_then(|m| m.get("name")).and_then(|n| n.as_str()).unwrap_or("");
        let ns = match m.and_then(|m| m.get("namespace")).and_then(|n| n.as_str()) {
            Some(n) if ns.is_empty() => n.to_string(),
            _ => ns.to_string(),
        };
        if ns.is_empty() {
            name.to_string()
        } else {
            format!("{}/{}", ns, name)
        }
    }

    /// The cache a write lands in: "apps/v1/deployments" is "deployments".
    fn cache_resource(res: &str) -> &str {
        res.rsplit('/').next().unwrap_or(res)
    }

    fn simple_key(k: &str) -> bool {
        !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    /// The paths of a member `k` under `prefix`: `a.k` (for a simple key)
    /// and `a["k"]`.
    fn member_paths(prefix: &str, k: &str) -> Vec<String> {
        let mut quoted = String::new();
        crate::metrics::json_string(&mut quoted, k);
        let mut p = vec![format!("{}[{}]", prefix, quoted)];
        if simple_key(k) {
            p.push(if prefix.is_empty() { k.to_string() } else { format!("{}.{}", prefix, k) });
        }
        p
    }

    fn field_of(v: &json::Value) -> (u32, Vec<u8>) {
        match v {
            json::Value::String(s) => (1, s.as_bytes().to_vec()),
            json::Value::Number(_, t) => (2, t.as_bytes().to_vec()),
            json::Value::Bool(b) => (3, b.to_string().into_bytes()),
            json::Value::Null => (4, b"null".to_vec()),
            json::Value::Object(_) => (5, v.to_string().into_bytes()),
            json::Value::Array(_) => (6, v.to_string().into_bytes()),
        }
    }

    /// Adds the fields of `v` at `path`: every node with `objects`, else
    /// the leaves (an object's text would go stale under a merge).
    fn flatten(v: &json::Value, path: &str, objects: bool, out: &mut Fields) {
        match v {
            json::Value::Object(m) => {
                if objects && !path.is_empty() {
                    out.insert(path.to_string(), field_of(v));
                }
                for (k, x) in m {
                    for p in member_paths(path, k) {
                        flatten(x, &p, objects, out);
                    }
                }
            }
            json::Value::Array(a) => {
                out.insert(path.to_string(), field_of(v));
                for (i, x) in a.iter().enumerate() {
                    flatten(x, &format!("{}[{}]", path, i), objects, out);
                }
            }
            _ => {
                out.insert(path.to_string(), field_of(v));
            }
        }
    }

    fn text_field(f: &Fields, path: &str) -> String {
        f.get(path).map(|(_, v)| String::from_utf8_lossy(v).into_owned()).unwrap_or_default()
    }

    /// The default answer to a write: applied to the fake cache, as the
    /// apiserver would to the cluster. A create of an existing object is
    /// ERR_EXISTS; a patch, a must-exist apply or a delete of a missing
    /// one ERR_ABSENT; a precondition the object does not meet
    /// ERR_CONFLICT. The body's fields are merged into the object (an
    /// apply as a merge patch, without field ownership; a JSON patch
    /// changes only the resourceVersion), each change sets a new
    /// `metadata.resourceVersion`, a created object gets a `metadata.uid`,
    /// and a subresource write changes the object itself. The answer is
    /// the object's fields, read through the write's handle.
    pub fn apply_write(r: &WriteRequest) -> (i32, String) {
        let body = if r.body.is_empty() { json::Value::Null } else {
            match json::parse(r.body.as_bytes()) {
                Ok(v) => v,
                Err(e) => return (-5, format!("the body is not JSON: {}", e)),
            }
        };
        let res = cache_resource(&r.resource).to_string();
        let name = if r.name.is_empty() { key_of(&body, "").rsplit('/').next().unwrap_or("").to_string() } else { r.name.clone() };
        let key = if r.namespace.is_empty() { name.clone() } else { format!("{}/{}", r.namespace, name) };
        let not_found = format!("{} {:?} not found", res, name);
        with(|h| {
            let cur = h.cache.get(&(res.clone(), key.clone())).cloned();
            if let Some(f) = &cur {
                let (uid, rv) = (text_field(f, "metadata.uid"), text_field(f, "metadata.resourceVersion"));
                if !r.uid.is_empty() && uid != r.uid {
                    return (-9, format!("Precondition failed: UID in precondition: {}, UID in object meta: {}", r.uid, uid));
                }
                if !r.resource_version.is_empty() && rv != r.resource_version {
                    return (-9, format!("the object has been modified (resourceVersion {}, precondition {})", rv, r.resource_version));
                }
            }
            let mut v = match (r.op, cur) {
                ("delete", None) | ("merge-patch", None) | ("json-patch", None) => return (-1, not_found),
                ("apply", None) if r.must_exist => return (-1, not_found),
                ("apply", None) if !r.uid.is_empty() => return (-9, format!("Precondition failed: UID in precondition: {}, the object does not exist", r.uid)),
                ("create", Some(_)) => return (-11, format!("{} {:?} already exists", res, name)),
                ("delete", Some(_)) => {
                    h.cache.remove(&(res, key));
                    return (0, String::new());
                }
                ("create", None) | ("apply", None) => {
                    if name.is_empty() {
                        return (-13, "name or generateName is required".to_string());
                    }
                    let mut v = json::Value::Object(Vec::new());
                    merge_value(&mut v, &body);
                    let mut meta = vec![("name".to_string(), json::Value::String(name.clone()))];
                    // A cluster-scoped object has no namespace, whatever the body says.
                    meta.push(("namespace".to_string(), if r.namespace.is_empty() { json::Value::Null } else { json::Value::String(r.namespace.clone()) }));
                    meta.push(("uid".to_string(), json::Value::String(format!("fake-uid-{}", h.resource_version + 1))));
                    merge_value(&mut v, &json::Value::Object(vec![("metadata".to_string(), json::Value::Object(meta))]));
                    v
                }
                ("json-patch", Some(f)) => value_of(&f),
                (_, Some(f)) => {
                    let mut v = value_of(&f);
                    merge_value(&mut v, &body);
                    v
                }
                (_, None) => return (-5, format!("unknown op {:?}", r.op)),
            };
            h.resource_version += 1;
            let rv = json::Value::String(h.resource_version.to_string());
            merge_value(&mut v, &json::Value::Object(vec![("metadata".to_string(), json::Value::Object(vec![("resourceVersion".to_string(), rv)]))]));
            let f = fields_of(&v);
            h.cache.insert((res, key), f.clone());
            h.write_answer = Some(f);
            (0, String::new())
        })
    }

    /// The next event: type 1 add, 2 update, 3 delete; flags of section 8.
    pub fn event(event_type: u8, flags: u8, resource: &str, namespace: &str, name: &str) {
        let h = Header::build(event_type, flags, [resource, "", "v1", resource, "", namespace, name, "uid", "1"]);
        with(|s| s.header = Some(h));
    }

    /// A field of the event's object (which 0) or old object (1): kind 1
    /// string (`value` its bytes), else JSON text.
    pub fn field(which: i32, path: &str, kind: u32, value: &str) {
        with(|h| h.fields.insert((which, path.to_string()), (kind, value.as_bytes().to_vec())));
    }

    /// The event's object (0) or old object (1) as JSON, for object_read.
    pub fn object(which: usize, json: &str) {
        with(|h| h.objects[which] = Some(json.to_string()));
    }

    pub fn set_config(c: &[u8]) {
        with(|h| h.config = c.to_vec());
    }

    /// An object of `resource` in the cache, its fields as in [`field`].
    pub fn cached(resource: &str, key: &str, fields: &[(&str, u32, &str)]) {
        let mut f: Fields = fields.iter().map(|(p, k, v)| (p.to_string(), (*k, v.as_bytes().to_vec()))).collect();
        let whole = value_of(&f).to_string().into_bytes();
        f.insert(ROOT.to_string(), (5, whole));
        with(|h| h.cache.insert((resource.to_string(), key.to_string()), f));
    }

    /// Takes a capability away, as an operator who did not grant it:
    /// "cache", "state" or "metrics" then answer ERR_DENIED (kept across
    /// [`reset`], like the configuration).
    pub fn deny(capability: &'static str) {
        assert!(["cache", "state", "metrics"].contains(&capability), "fake::deny({:?}): not a capability it can deny (cache, state, metrics)", capability);
        with(|h| h.denied.push(capability));
    }

    fn denied(capability: &str) -> bool {
        with(|h| h.denied.contains(&capability))
    }

    /// Calls `f` as ih_handle would; the code and the set_error message.
    pub fn handle(f: fn(&Event) -> Result) -> (i32, String) {
        let len = with(|h| h.header.as_ref().map(|b| b.len() as i32).unwrap_or(0));
        let code = crate::export::handle(len, f);
        (code, error_message())
    }

    /// Calls `f` as ih_handle_batch would (the plugin's `batch: f`), for
    /// one event per `(event_type, flags, resource, namespace, name)` as
    /// [`event`] takes them, sharing the fields and objects set up with
    /// [`field`] and [`object`]: what the export returned (the events it
    /// settled) and each settled event's code and set_error message, in
    /// order. As the host does, each batch_select starts the event's call
    /// over (its message, its cache handles).
    pub fn handle_batch(f: fn(&Event) -> Result, events: &[(u8, u8, &str, &str, &str)]) -> (i32, Vec<(i32, String)>) {
        let headers = events
            .iter()
            .map(|&(t, fl, res, ns, name)| Header::build(t, fl, [res, "", "v1", res, "", ns, name, "uid", "1"]))
            .collect();
        with(|h| h.batch = Some(Batch { headers, ..Batch::default() }));
        let n = crate::export::handle_batch(events.len() as i32, f);
        let b = with(|h| {
            h.header = None;
            h.batch.take().unwrap_or_default()
        });
        (n, b.results)
    }

    /// Calls `f` as ih_synced would (the plugin's `synced: f`) for
    /// `resource`: the binding's initial list is handled (section 5).
    pub fn synced(f: fn(&Header), resource: &str) {
        let h = Header::build(0, 0, [resource, "", "v1", resource, "", "", "", "", ""]);
        let len = h.len() as i32;
        with(|s| s.header = Some(h));
        crate::export::synced(len, f);
        with(|s| {
            s.header = None;
            s.handles.clear();
        });
    }

    pub fn logs() -> Vec<(i32, String)> {
        with(|h| h.logs.clone())
    }
    pub fn error_message() -> String {
        with(|h| h.error.clone())
    }
    pub fn state_value(key: &[u8]) -> Option<Vec<u8>> {
        with(|h| h.state.get(key).map(|(v, _)| v.clone()))
    }
    /// Declarations (`kind declaration-json`) and updates (`op id value labels`).
    pub fn metric_declarations() -> Vec<String> {
        with(|h| h.metrics.clone())
    }
    pub fn metric_updates() -> Vec<String> {
        with(|h| h.updates.clone())
    }

    // The imports' stand-ins: the size protocol and the codes of abi/ABI.md.
    pub mod raw {
        use super::{denied, with};
        use std::slice;

        unsafe fn bytes<'a>(p: *const u8, n: i32) -> &'a [u8] {
            if n <= 0 {
                &[]
            } else {
                slice::from_raw_parts(p, n as usize)
            }
        }
        unsafe fn text(p: *const u8, n: i32) -> String {
            String::from_utf8_lossy(bytes(p, n)).into_owned()
        }
        /// The size protocol: copies `v` when it fits, returns its size.
        unsafe fn out(v: &[u8], p: *mut u8, n: i32) -> i32 {
            if v.len() <= n.max(0) as usize {
                std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len());
            }
            v.len() as i32
        }

        pub unsafe fn header_read(p: *mut u8, n: i32) -> i32 {
            with(|h| match &h.header {
                Some(b) => out(b, p, n),
                None => -6,
            })
        }
        fn handle_object(h: &super::Host, which: i32) -> Option<&super::Fields> {
            h.handles.get((which - 2) as usize)
        }
        pub unsafe fn object_read(which: i32, p: *mut u8, n: i32) -> i32 {
            with(|h| match which {
                0 | 1 => match &h.objects[which as usize] {
                    Some(j) => out(j.as_bytes(), p, n),
                    None => -1,
                },
                _ => match handle_object(h, which) {
                    Some(f) => match f.get(super::ROOT) {
                        Some((_, b)) => out(b, p, n),
                        None => -7,
                    },
                    None => -5,
                },
            })
        }
        pub unsafe fn field_read(which: i32, path: *const u8, path_len: i32, p: *mut u8, n: i32) -> i64 {
            let path = text(path, path_len);
            with(|h| {
                let (kind, v) = match which {
                    0 | 1 => match h.fields.get(&(which, path)) {
                        Some(f) => f.clone(),
                        // No object: absent (an absent key's reconcile), not a missing field.
                        None if h.objects[which as usize].is_none() && (which == 1 || super::ctl::reconciling()) => return -1,
                        None => return -2,
                    },
                    _ => match handle_object(h, which) {
                        Some(fields) => match fields.get(&path) {
                            Some(f) => f.clone(),
                            None => return -2,
                        },
                        None => return -5,
                    },
                };
                (kind as i64) << 32 | out(&v, p, n) as i64
            })
        }
        pub unsafe fn config_read(p: *mut u8, n: i32) -> i32 {
            with(|h| out(&h.config, p, n))
        }
        pub unsafe fn batch_select(index: i32) -> i32 {
            with(|h| {
                let b = match &mut h.batch {
                    Some(b) => b,
                    None => return -6,
                };
                if index < 0 || index as usize != b.results.len() || index as usize >= b.headers.len() {
                    return -5;
                }
                let i = index as usize;
                let header = b.headers[i].clone();
                if b.cur != Some(i) {
                    b.cur = Some(i);
                    h.error.clear();
                    h.result.clear();
                    h.handles.clear();
                }
                let len = header.len() as i32;
                h.header = Some(header);
                len
            })
        }
        pub unsafe fn batch_result(code: i32) -> i32 {
            with(|h| {
                let error = h.error.clone();
                match &mut h.batch {
                    Some(b) if b.cur.is_some() => {
                        b.results.push((code, error));
                        b.cur = None;
                        h.header = None;
                        0
                    }
                    _ => -6,
                }
            })
        }
        pub unsafe fn set_error(p: *const u8, n: i32) -> i32 {
            let m = text(p, n);
            with(|h| h.error = m);
            0
        }
        pub unsafe fn log(level: i32, p: *const u8, n: i32) -> i32 {
            if !(0..=3).contains(&level) {
                return -5;
            }
            let m = text(p, n);
            with(|h| h.logs.push((level, m)));
            0
        }
        pub unsafe fn cache_get(res: *const u8, res_len: i32, ns: *const u8, ns_len: i32, name: *const u8, name_len: i32) -> i32 {
            if denied("cache") {
                return -8;
            }
            let (res, ns, name) = (text(res, res_len), text(ns, ns_len), text(name, name_len));
            let key = if ns.is_empty() { name } else { format!("{}/{}", ns, name) };
            with(|h| match h.cache.get(&(res, key)) {
                None => -1,
                Some(f) => {
                    let f = f.clone();
                    h.handles.push(f);
                    h.handles.len() as i32 + 1
                }
            })
        }
        const PAGE: usize = 2;
        unsafe fn page(keys: Vec<String>, start: i32, p: *mut u8, n: i32) -> i64 {
            if start < 0 {
                return -5;
            }
            let text: String = keys.iter().skip(start as usize).take(PAGE).map(|k| format!("{}\n", k)).collect();
            (keys.len() as i64) << 32 | out(text.as_bytes(), p, n) as i64
        }
        fn keys_of(res: &str, keep: impl Fn(&str) -> bool) -> Vec<String> {
            with(|h| h.cache.keys().filter(|(r, k)| r == res && keep(k)).map(|(_, k)| k.clone()).collect())
        }
        fn in_namespace(key: &str, ns: &str) -> bool {
            ns.is_empty() || key.starts_with(&format!("{}/", ns))
        }
        /// Label selectors of the equality and set-based forms
        /// (super::parse_selector); one that does not parse is ERR_INVALID.
        pub unsafe fn cache_list(res: *const u8, res_len: i32, ns: *const u8, ns_len: i32, sel: *const u8, sel_len: i32, start: i32, p: *mut u8, n: i32) -> i64 {
            if denied("cache") {
                return -8;
            }
            let sel = match super::parse_selector(&text(sel, sel_len)) {
                Some(s) => s,
                None => return -5,
            };
            let (res, ns) = (text(res, res_len), text(ns, ns_len));
            let keys = with(|h| {
                h.cache
                    .iter()
                    .filter(|((r, k), f)| *r == res && in_namespace(k, &ns) && super::selector_matches(&sel, &super::labels_of(f)))
                    .map(|((_, k), _)| k.clone())
                    .collect()
            });
            page(keys, start, p, n)
        }
        /// The fake knows the namespace index only.
        pub unsafe fn cache_index(res: *const u8, res_len: i32, index: *const u8, index_len: i32, value: *const u8, value_len: i32, start: i32, p: *mut u8, n: i32) -> i64 {
            if denied("cache") {
                return -8;
            }
            let v = text(value, value_len);
            let res = text(res, res_len);
            match text(index, index_len).as_str() {
                "namespace" => page(keys_of(&res, |k| in_namespace(k, &v)), start, p, n),
                // By ownerReferences uid, as the host's "owner" index.
                "owner" => {
                    let owned: Vec<String> = with(|h| {
                        h.cache
                            .iter()
                            .filter(|((r, _), f)| *r == res && super::owner_uids(f).iter().any(|u| *u == v))
                            .map(|((_, k), _)| k.clone())
                            .collect()
                    });
                    page(owned, start, p, n)
                }
                _ => -5,
            }
        }
        pub unsafe fn state_get(key: *const u8, key_len: i32, p: *mut u8, n: i32, version: *mut i64) -> i32 {
            if denied("state") {
                return -8;
            }
            let key = bytes(key, key_len).to_vec();
            if key.is_empty() || key.len() > 1024 {
                return -5;
            }
            with(|h| match h.state.get(&key) {
                Some((v, ver)) => {
                    *version = *ver;
                    out(v, p, n)
                }
                None => -1,
            })
        }
        pub unsafe fn state_set(key: *const u8, key_len: i32, val: *const u8, val_len: i32, if_version: i64) -> i64 {
            if denied("state") {
                return -8;
            }
            let (key, val) = (bytes(key, key_len).to_vec(), bytes(val, val_len).to_vec());
            if key.is_empty() || key.len() > 1024 || if_version < -1 {
                return -5;
            }
            with(|h| {
                let cur = h.state.get(&key).map(|(_, v)| *v);
                let ok = match if_version {
                    -1 => true,
                    0 => cur.is_none(),
                    v => cur == Some(v),
                };
                if !ok {
                    return -9;
                }
                h.next_version += 1;
                let v = h.next_version;
                h.state.insert(key, (val, v));
                v
            })
        }
        pub unsafe fn state_delete(key: *const u8, key_len: i32, if_version: i64) -> i32 {
            if denied("state") {
                return -8;
            }
            let key = bytes(key, key_len).to_vec();
            if key.is_empty() || key.len() > 1024 || if_version == 0 || if_version < -1 {
                return -5;
            }
            with(|h| {
                let cur = h.state.get(&key).map(|(_, v)| *v);
                match (cur, if_version) {
                    (None, -1) => -1,
                    (Some(_), -1) => {
                        h.state.remove(&key);
                        0
                    }
                    (Some(c), v) if c == v => {
                        h.state.remove(&key);
                        0
                    }
                    _ => -9,
                }
            })
        }
        pub unsafe fn state_list(prefix: *const u8, prefix_len: i32, after: *const u8, after_len: i32, max: i32, p: *mut u8, n: i32) -> i64 {
            if denied("state") {
                return -8;
            }
            let (prefix, after) = (bytes(prefix, prefix_len).to_vec(), bytes(after, after_len).to_vec());
            if !(1..=1000).contains(&max) {
                return -5;
            }
            with(|h| {
                let keys: Vec<&Vec<u8>> =
                    h.state.keys().filter(|k| k.starts_with(&prefix) && (after.is_empty() || **k > after)).take(max as usize).collect();
                let mut buf = Vec::new();
                for k in &keys {
                    buf.extend_from_slice(&(k.len() as u32).to_le_bytes());
                    buf.extend_from_slice(k);
                }
                (keys.len() as i64) << 32 | out(&buf, p, n) as i64
            })
        }
        pub unsafe fn metric_declare(kind: i32, p: *const u8, n: i32) -> i32 {
            if denied("metrics") {
                return -8;
            }
            let d = text(p, n);
            with(|h| {
                if let Some(i) = h.metrics.iter().position(|m| *m == format!("{} {}", kind, d)) {
                    return i as i32;
                }
                h.metrics.push(format!("{} {}", kind, d));
                h.metrics.len() as i32 - 1
            })
        }
        fn update(op: &str, id: i32, v: f64, labels: String) -> i32 {
            with(|h| {
                if id < 0 || id as usize >= h.metrics.len() || v.is_nan() {
                    return -5;
                }
                h.updates.push(format!("{} {} {} {}", op, id, v, labels.replace('\0', ",")));
                0
            })
        }
        pub unsafe fn metric_add(id: i32, v: f64, p: *const u8, n: i32) -> i32 {
            update("add", id, v, text(p, n))
        }
        pub unsafe fn metric_set(id: i32, v: f64, p: *const u8, n: i32) -> i32 {
            update("set", id, v, text(p, n))
        }
        pub unsafe fn metric_observe(id: i32, v: f64, p: *const u8, n: i32) -> i32 {
            update("observe", id, v, text(p, n))
        }
        pub unsafe fn result_message(p: *mut u8, n: i32) -> i32 {
            let m = with(|h| h.result.clone());
            out(m.as_bytes(), p, n)
        }
        /// The answer set with fake::answer, taken, with its message as
        /// the result message; None: success (result message empty).
        fn answered() -> Option<i32> {
            with(|h| {
                let a = h.answer.take();
                h.result = a.as_ref().map(|(_, m)| m.clone()).unwrap_or_default();
                a.map(|(c, _)| c)
            })
        }
        /// What the host refuses before any request (section 17.1).
        fn check_write(op: i32, r: &super::WriteRequest, flags: i32) -> Option<(i32, String)> {
            let apply = op == crate::writes::APPLY;
            let e = |m: String| Some((-5, m));
            if r.op.is_empty() {
                return e(format!("unknown op {}", op));
            }
            if flags & !3 != 0 {
                return e(format!("unknown flags {:#x}", flags & !3));
            }
            if flags != 0 && !apply {
                return e(format!("force and must-exist are flags of an apply, not of a {}", r.op));
            }
            if r.name.is_empty() && op != crate::writes::CREATE {
                return e(format!("a {} needs the object's name", r.op));
            }
            if op == crate::writes::DELETE {
                return if r.body.is_empty() { None } else { e("a delete takes no body".to_string()) };
            }
            if op == crate::writes::CREATE && (!r.uid.is_empty() || !r.resource_version.is_empty()) {
                return e("a create takes no preconditions".to_string());
            }
            let body = match crate::json::parse(r.body.as_bytes()) {
                Ok(b) => b,
                Err(_) => return e(format!("the body of the {} is not JSON", r.op)),
            };
            if apply {
                for f in ["apiVersion", "kind"] {
                    if body.get(f).and_then(|v| v.as_str()).unwrap_or("").is_empty() {
                        return e(format!("the applied configuration has no {}", f));
                    }
                }
            }
            None
        }
        pub unsafe fn k8s_write(op: i32, res: *const u8, res_len: i32, ns: *const u8, ns_len: i32, name: *const u8, name_len: i32, sub: *const u8, sub_len: i32,
            body: *const u8, body_len: i32, uid: *const u8, uid_len: i32, rv: *const u8, rv_len: i32, flags: i32) -> i32 {
            let r = super::WriteRequest {
                op: crate::writes::op_name(op),
                resource: text(res, res_len),
                namespace: text(ns, ns_len),
                name: text(name, name_len),
                subresource: text(sub, sub_len),
                body: text(body, body_len),
                uid: text(uid, uid_len),
                resource_version: text(rv, rv_len),
                force: flags & crate::writes::FORCE != 0,
                must_exist: flags & crate::writes::MUST_EXIST != 0,
            };
            with(|h| {
                h.writes.push(r.clone());
                h.result.clear();
                h.write_answer = None;
            });
            if let Some((code, m)) = check_write(op, &r, flags) {
                with(|h| h.result = m);
                return code;
            }
            if let Some(c) = answered() {
                return c;
            }
            let (code, out) = match with(|h| h.on_write) {
                Some(f) => f(&r),
                None => super::apply_write(&r),
            };
            if code < 0 {
                with(|h| h.result = out);
                return code;
            }
            if op == crate::writes::DELETE {
                return 0;
            }
            let mut fields = with(|h| h.write_answer.take()).unwrap_or_default();
            if !out.is_empty() {
                fields.clear();
                match crate::json::parse(out.as_bytes()) {
                    Ok(v) => fields = super::fields_of(&v),
                    Err(e) => panic!("fake::on_write answered an object that is not JSON: {}", e),
                }
            }
            with(|h| {
                h.handles.push(fields);
                h.handles.len() as i32 + 1
            })
        }
        fn valid_reason(r: &str) -> bool {
            !r.is_empty() && r.len() <= 128 && r.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b))
        }
        pub unsafe fn event_record(which: i32, typ: i32, reason: *const u8, reason_len: i32, msg: *const u8, msg_len: i32) -> i32 {
            let (reason, message) = (text(reason, reason_len), text(msg, msg_len));
            with(|h| h.result.clear());
            let fail = |code: i32, m: String| {
                with(|h| h.result = m);
                code
            };
            let event_type = match typ {
                0 => "Normal",
                1 => "Warning",
                _ => return fail(-5, format!("event type {} is neither 0 (Normal) nor 1 (Warning)", typ)),
            };
            let known = with(|h| match which {
                0 => h.header.is_some(),
                1 => h.objects[1].is_some() || h.fields.keys().any(|(w, _)| *w == 1),
                _ => handle_object(h, which).is_some(),
            });
            if !known {
                return fail(if which == 1 { -1 } else { -5 }, format!("event_record: no object for which {}", which));
            }
            if !valid_reason(&reason) {
                return fail(-5, format!("reason {:?} is not 1 to 128 letters, digits and _-.:", reason));
            }
            if message.len() > 1024 {
                return fail(-17, format!("the message is {} bytes, over 1024", message.len()));
            }
            if let Some(c) = answered() {
                return c;
            }
            with(|h| h.events.push(super::RecordedEvent { which, event_type, reason, message }));
            0
        }
        pub unsafe fn http_request(up: *const u8, up_len: i32, method: *const u8, method_len: i32, path: *const u8, path_len: i32,
            headers: *const u8, headers_len: i32, body: *const u8, body_len: i32) -> i32 {
            let header = text(headers, headers_len)
                .lines()
                .filter(|l| !l.is_empty())
                .map(|l| match l.split_once(':') {
                    Some((k, v)) => (k.to_string(), v.trim().to_string()),
                    None => (l.to_string(), String::new()),
                })
                .collect();
            let r = super::HttpRequest { upstream: text(up, up_len), method: text(method, method_len), path: text(path, path_len), header, body: bytes(body, body_len).to_vec() };
            with(|h| {
                h.last_response = None;
                h.result.clear();
            });
            if !(r.path.is_empty() || r.path.starts_with('/') || r.path.starts_with('?'))
                || r.path.split(|c| c == '/' || c == '?').any(|s| s == "." || s == "..")
            {
                with(|h| h.result = format!("path {:?} would leave the upstream's base", r.path));
                return -5;
            }
            // Recorded once the host would send it, as Go's kittest does.
            with(|h| h.http.push(r.clone()));
            if let Some(c) = answered() {
                return c;
            }
            let resp = match with(|h| h.upstreams.get(&r.upstream).copied()) {
                Some(f) => f(&r),
                None => match with(|h| h.response.clone()) {
                    Some((status, header, body)) => super::HttpResponse { status, header, body, ..Default::default() },
                    None => super::HttpResponse { status: 200, ..Default::default() },
                },
            };
            if resp.code < 0 {
                with(|h| h.result = resp.message.clone());
                return resp.code;
            }
            let status = resp.status;
            with(|h| h.last_response = Some(resp));
            status
        }
        // Controller mode (section 18): the fake loop of fakectl.rs.
        pub unsafe fn reconcile_requeue_after(millis: i64) -> i32 {
            super::ctl::requeue_after(millis)
        }
        pub unsafe fn children_apply(p: *const u8, n: i32) -> i32 {
            super::ctl::children_apply(bytes(p, n))
        }
        pub unsafe fn status_apply(p: *const u8, n: i32) -> i32 {
            super::ctl::status_apply(bytes(p, n))
        }
        pub unsafe fn http_response_read(part: i32, p: *mut u8, n: i32) -> i32 {
            with(|h| match (&h.last_response, part) {
                (_, 2..) | (_, i32::MIN..=-1) => -5,
                (None, _) => -1,
                (Some(r), 0) => out(&r.body, p, n),
                (Some(r), _) => out(r.header.as_bytes(), p, n),
            })
        }
    }
}
