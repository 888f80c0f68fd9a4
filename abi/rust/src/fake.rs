//! An in-memory host for native unit tests of a plugin's logic (`rustc
//! --test` or `cargo test` on the machine's own target). Off wasm the
//! kit's imports are these functions: set an event up with [`event`],
//! [`field`], [`object`], call the handler through [`handle`], then look
//! at [`logs`], [`error_message`], [`state_value`], [`metric_updates`],
//! and, for capabilities II, [`writes`], [`events`], [`http_requests`]
//! (answered as [`answer`] and [`http_response`] say).
//! Every test thread has its own host. Cache lists come in pages of 2
//! keys, so the kit's paging is exercised. On wasm this module is empty.
#![cfg_attr(target_arch = "wasm32", allow(dead_code))]

#[cfg(not(target_arch = "wasm32"))]
pub use imp::*;

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use crate::{Event, Header, Result};
    use std::cell::RefCell;
    use std::collections::BTreeMap;

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
        cache: BTreeMap<(String, String), BTreeMap<String, (u32, Vec<u8>)>>, // (resource, key) -> fields
        handles: Vec<(String, String)>,
        metrics: Vec<String>,
        updates: Vec<String>,
        // Capabilities II: the next call's failure, the result message,
        // what was asked, and the HTTP answer.
        answer: Option<(i32, String)>,
        result: String,
        writes: Vec<String>,
        events: Vec<String>,
        http: Vec<String>,
        response: Option<(i32, String, Vec<u8>)>,
        have_response: bool,
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
            h.writes.clear();
            h.events.clear();
            h.http.clear();
            h.have_response = false;
        })
    }

    /// The next capabilities II call (k8s_write, event_record,
    /// http_request) fails with `code` and `message` (result_message).
    pub fn answer(code: i32, message: &str) {
        with(|h| h.answer = Some((code, message.to_string())));
    }

    /// What http_request answers from now on (default 200, no header, no
    /// body); `header` is "Name: value\n" lines.
    pub fn http_response(status: i32, header: &str, body: &[u8]) {
        with(|h| h.response = Some((status, header.to_string(), body.to_vec())));
    }

    /// The writes asked for: `op resource ns/name sub=.. uid=.. rv=.. flags=.. body=..`.
    /// A successful write returns a handle to the target's cached object
    /// ([`cached`] under the target's resource and key), 0 for a delete.
    pub fn writes() -> Vec<String> {
        with(|h| h.writes.clone())
    }
    /// The Events recorded: `which type reason message`.
    pub fn events() -> Vec<String> {
        with(|h| h.events.clone())
    }
    /// The HTTP requests: `upstream method path header-lines body`.
    pub fn http_requests() -> Vec<String> {
        with(|h| h.http.clone())
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
        let f = fields.iter().map(|(p, k, v)| (p.to_string(), (*k, v.as_bytes().to_vec()))).collect();
        with(|h| h.cache.insert((resource.to_string(), key.to_string()), f));
    }

    /// Calls `f` as ih_handle would; the code and the set_error message.
    pub fn handle(f: fn(&Event) -> Result) -> (i32, String) {
        let len = with(|h| h.header.as_ref().map(|b| b.len() as i32).unwrap_or(0));
        let code = crate::export::handle(len, f);
        (code, error_message())
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
        use super::with;
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
        fn handle_object(h: &super::Host, which: i32) -> Option<&(String, String)> {
            h.handles.get((which - 2) as usize)
        }
        pub unsafe fn object_read(which: i32, p: *mut u8, n: i32) -> i32 {
            with(|h| match which {
                0 | 1 => match &h.objects[which as usize] {
                    Some(j) => out(j.as_bytes(), p, n),
                    None => -1,
                },
                _ => match handle_object(h, which) {
                    Some(_) => -7, // the fake keeps cached objects' fields only
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
                        None if which == 1 && h.objects[1].is_none() => return -1,
                        None => return -2,
                    },
                    _ => match handle_object(h, which).and_then(|k| h.cache.get(k)) {
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
            let (res, ns, name) = (text(res, res_len), text(ns, ns_len), text(name, name_len));
            let key = if ns.is_empty() { name } else { format!("{}/{}", ns, name) };
            with(|h| {
                if !h.cache.contains_key(&(res.clone(), key.clone())) {
                    return -1;
                }
                h.handles.push((res, key));
                h.handles.len() as i32 + 1
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
        /// Selectors are not evaluated by the fake: any but "" is ERR_INVALID.
        pub unsafe fn cache_list(res: *const u8, res_len: i32, ns: *const u8, ns_len: i32, sel: *const u8, sel_len: i32, start: i32, p: *mut u8, n: i32) -> i64 {
            if sel_len != 0 {
                let _ = text(sel, sel_len);
                return -5;
            }
            let ns = text(ns, ns_len);
            page(keys_of(&text(res, res_len), |k| in_namespace(k, &ns)), start, p, n)
        }
        /// The fake knows the namespace index only.
        pub unsafe fn cache_index(res: *const u8, res_len: i32, index: *const u8, index_len: i32, value: *const u8, value_len: i32, start: i32, p: *mut u8, n: i32) -> i64 {
            if text(index, index_len) != "namespace" {
                return -5;
            }
            let ns = text(value, value_len);
            page(keys_of(&text(res, res_len), |k| in_namespace(k, &ns)), start, p, n)
        }
        pub unsafe fn state_get(key: *const u8, key_len: i32, p: *mut u8, n: i32, version: *mut i64) -> i32 {
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
        pub unsafe fn k8s_write(op: i32, res: *const u8, res_len: i32, ns: *const u8, ns_len: i32, name: *const u8, name_len: i32, sub: *const u8, sub_len: i32,
            body: *const u8, body_len: i32, uid: *const u8, uid_len: i32, rv: *const u8, rv_len: i32, flags: i32) -> i32 {
            let (res, ns, name) = (text(res, res_len), text(ns, ns_len), text(name, name_len));
            let w = format!("{} {} {}/{} sub={} uid={} rv={} flags={} body={}", op, res, ns, name, text(sub, sub_len), text(uid, uid_len),
                text(rv, rv_len), flags, text(body, body_len));
            with(|h| h.writes.push(w));
            if !(1..=5).contains(&op) {
                with(|h| h.result = format!("unknown k8s_write op {}", op));
                return -5;
            }
            if let Some(c) = answered() {
                return c;
            }
            if op == 5 {
                return 0;
            }
            let key = if ns.is_empty() { name } else { format!("{}/{}", ns, name) };
            with(|h| {
                h.handles.push((res, key));
                h.handles.len() as i32 + 1
            })
        }
        pub unsafe fn event_record(which: i32, typ: i32, reason: *const u8, reason_len: i32, msg: *const u8, msg_len: i32) -> i32 {
            let e = format!("{} {} {} {}", which, typ, text(reason, reason_len), text(msg, msg_len));
            with(|h| h.events.push(e));
            answered().unwrap_or(0)
        }
        pub unsafe fn http_request(up: *const u8, up_len: i32, method: *const u8, method_len: i32, path: *const u8, path_len: i32,
            headers: *const u8, headers_len: i32, body: *const u8, body_len: i32) -> i32 {
            let r = format!("{} {} {} {:?} {}", text(up, up_len), text(method, method_len), text(path, path_len), text(headers, headers_len),
                text(body, body_len));
            with(|h| h.http.push(r));
            if let Some(c) = answered() {
                with(|h| h.have_response = false);
                return c;
            }
            with(|h| {
                h.have_response = true;
                h.response.as_ref().map(|r| r.0).unwrap_or(200)
            })
        }
        pub unsafe fn http_response_read(part: i32, p: *mut u8, n: i32) -> i32 {
            with(|h| {
                if !h.have_response {
                    return -1;
                }
                let (hdr, body) = match &h.response {
                    Some((_, hdr, body)) => (hdr.as_bytes(), body.as_slice()),
                    None => (&b""[..], &b""[..]),
                };
                match part {
                    0 => out(body, p, n),
                    1 => out(hdr, p, n),
                    _ => -5,
                }
            })
        }
    }
}
