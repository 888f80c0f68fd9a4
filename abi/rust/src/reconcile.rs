//! Controller mode (ABI v1.5, abi/ABI.md section 18): a plugin whose
//! configuration has a `controller:` block is called once per primary
//! key through `ih_reconcile`, never per event, and answers with the
//! state it wants: the complete set of the key's children, the status it
//! owns, and when to look again. The host applies the children as the
//! plugin's identity, prunes those no longer wanted, writes the status
//! through the status subresource and keeps the requeue timer.
//!
//! ```ignore
//! use informer_host::{json::object, reconcile::{Children, Condition, Outcome, Request, Status}};
//!
//! fn reconcile(req: &Request) -> informer_host::Result<Outcome> {
//!     let mut children = Children::new();
//!     if req.exists() && !req.deleting() {
//!         children.add(object([("apiVersion", "v1".into()), ("kind", "ConfigMap".into()),
//!             ("metadata", object([("name", format!("{}-copy", req.name()).into())]))]));
//!     }
//!     let mut status = Status::new();
//!     status.set_condition(Condition::new("Ready", "True", "Copied", ""));
//!     Ok(Outcome::new().children(children).status(status))
//! }
//! informer_host::plugin!(reconcile: reconcile);
//! ```
//!
//! An `Err` answers as a handler's does: [`crate::Fail::retry`] RETRY,
//! [`crate::Fail::drop`] DROP (the key's backoff is forgotten), anything
//! else ERROR (backoff, and it counts towards parking). A child the host
//! could not apply fails the reconcile with one line per child
//! (`<kind> <ns>/<name>: <error>`), after the others were applied and
//! the status written, so the key is retried with backoff;
//! [`apply_children`] gives a plugin the failures to act on itself.

use crate::{json, raw, CallError, Code, Error, Event, Fail};
use std::time::Duration;

/// The key to reconcile and, when the cache has it, its object: read
/// as an event's ([`crate::Event`]'s `get`, `field`, `object_json`,
/// `namespace`, `name`, `key`, `header`), or whole with
/// [`Request::object`].
pub struct Request {
    event: Event,
}

impl std::ops::Deref for Request {
    type Target = Event;
    fn deref(&self) -> &Event {
        &self.event
    }
}

impl Request {
    /// The cache has the object (header flag 0x40 unset): false once it
    /// is gone, when only its children are left to clean up.
    pub fn exists(&self) -> bool {
        !self.header().absent()
    }
    /// The object is being deleted (its deletionTimestamp is set): clean
    /// up and answer OK, and the host removes the finalizer.
    pub fn deleting(&self) -> bool {
        self.header().deleting()
    }
    /// A reconcile of the replay after a (re)start or reload.
    pub fn initial(&self) -> bool {
        self.header().initial_list()
    }
    /// The whole object, parsed; None when the key is absent. Parse once
    /// and keep it: each call reads and parses the object again.
    pub fn object(&self) -> std::result::Result<Option<json::Value>, Fail> {
        if !self.exists() {
            return Ok(None);
        }
        let b = crate::read_object(0).map_err(|e| Fail::error(format!("object_read: {}", e)))?;
        json::parse(&b).map(Some).map_err(|e| Fail::error(format!("the object is not JSON: {}", e)))
    }
}

/// What a reconcile wants. `Outcome::new()` changes nothing: children
/// left alone, no status, no requeue.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Reconcile the key again after this long (zero: not unless
    /// something changes). The host persists it on the object.
    pub requeue_after: Duration,
    /// The complete set of children (None: leave them as they are; an
    /// empty set prunes every child the host applied for the key).
    pub children: Option<Children>,
    /// The status fields the plugin owns (None: no status write).
    pub status: Option<Status>,
    /// A failed reconcile that still reports its status (a condition
    /// saying why): the children are left alone, the status is written,
    /// and this is the answer. A plain `Err` has no status to write.
    pub failure: Option<Fail>,
}

impl Outcome {
    pub fn new() -> Outcome {
        Outcome::default()
    }
    pub fn requeue_after(mut self, d: Duration) -> Outcome {
        self.requeue_after = d;
        self
    }
    pub fn children(mut self, c: Children) -> Outcome {
        self.children = Some(c);
        self
    }
    pub fn status(mut self, s: Status) -> Outcome {
        self.status = Some(s);
        self
    }
    /// Answers `f` (RETRY, DROP, ERROR) after writing the status.
    pub fn fail(mut self, f: Fail) -> Outcome {
        self.failure = Some(f);
        self
    }
}

/// The complete set of children a key wants, each an object with
/// apiVersion, kind and metadata.name (the namespace defaults to the
/// primary's), of a resource among `controller.owns`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Children {
    items: Vec<json::Value>,
}

impl Children {
    pub fn new() -> Children {
        Children::default()
    }
    /// Adds a child (build it with [`json::object`]).
    pub fn add(&mut self, child: json::Value) -> &mut Children {
        self.items.push(child);
        self
    }
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    pub fn items(&self) -> &[json::Value] {
        &self.items
    }
    /// The body of children_apply: a JSON array.
    pub fn to_json(&self) -> String {
        json::Value::Array(self.items.clone()).to_string()
    }
}

/// A status condition. The host sets `observedGeneration` and
/// `lastTransitionTime` (kept while the status is unchanged).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Condition {
    pub type_: String,
    /// "True", "False" or "Unknown".
    pub status: String,
    /// A CamelCase word.
    pub reason: String,
    pub message: String,
}

impl Condition {
    pub fn new(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition { type_: type_.into(), status: status.into(), reason: reason.into(), message: message.into() }
    }
    fn to_value(&self) -> json::Value {
        let mut m = vec![("type", self.type_.as_str().into()), ("status", self.status.as_str().into())];
        if !self.reason.is_empty() {
            m.push(("reason", self.reason.as_str().into()));
        }
        if !self.message.is_empty() {
            m.push(("message", self.message.as_str().into()));
        }
        json::object(m)
    }
}

/// The status fields the plugin owns: conditions and any others.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Status {
    fields: Vec<(String, json::Value)>,
    conditions: Vec<Condition>,
}

impl Status {
    pub fn new() -> Status {
        Status::default()
    }
    /// Sets status field `key` (not "conditions": use set_condition).
    pub fn set(&mut self, key: &str, v: impl Into<json::Value>) -> &mut Status {
        let v = v.into();
        match self.fields.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = v,
            None => self.fields.push((key.to_string(), v)),
        }
        self
    }
    /// Adds the condition, or replaces the one of its type (as
    /// apimachinery's meta.SetStatusCondition).
    pub fn set_condition(&mut self, c: Condition) -> &mut Status {
        match self.conditions.iter_mut().find(|x| x.type_ == c.type_) {
            Some(slot) => *slot = c,
            None => self.conditions.push(c),
        }
        self
    }
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
    /// The body of status_apply: a JSON object.
    pub fn to_json(&self) -> String {
        let mut v = json::Value::Object(self.fields.clone());
        if !self.conditions.is_empty() {
            v.set("conditions", json::Value::Array(self.conditions.iter().map(Condition::to_value).collect()));
        }
        v.to_string()
    }
}

/// The children the host could not apply (or prune) in one
/// children_apply: how many, and the host's line for each,
/// `<kind> <ns>/<name>: <error>`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChildFailures {
    pub count: i32,
    pub lines: Vec<String>,
}

impl ChildFailures {
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// children_apply now, for a plugin that acts on failed children itself
/// (its [`Outcome`] then leaves `children` None). Ok with the failures
/// (empty: every child applied and every stale one pruned); Err when the
/// host refused the set: `ERR_INVALID`, `ERR_DENIED` (a kind not among
/// controller.owns), `ERR_CANCELED`.
pub fn apply_children(c: &Children) -> std::result::Result<ChildFailures, CallError> {
    let body = c.to_json();
    let r = unsafe { raw::children_apply(body.as_ptr(), body.len() as i32) };
    if r < 0 {
        return Err(CallError { function: "children_apply", call: format!("{} children", c.len()), code: Error(r), message: crate::result_message() });
    }
    let lines = if r == 0 { Vec::new() } else { crate::result_message().lines().map(str::to_string).collect() };
    Ok(ChildFailures { count: r, lines })
}

/// status_apply now (an [`Outcome`]'s status does it after the call).
pub fn apply_status(s: &Status) -> std::result::Result<(), CallError> {
    let body = s.to_json();
    let r = unsafe { raw::status_apply(body.as_ptr(), body.len() as i32) };
    if r < 0 {
        return Err(CallError { function: "status_apply", call: String::new(), code: Error(r), message: crate::result_message() });
    }
    Ok(())
}

/// reconcile_requeue_after now: after an OK answer, reconcile the key
/// again after `d` (zero clears; over 366 days is ERR_INVALID).
pub fn requeue_after(d: Duration) -> std::result::Result<(), Error> {
    let ms = d.as_millis().min(i64::MAX as u128) as i64;
    match unsafe { raw::reconcile_requeue_after(ms) } {
        0 => Ok(()),
        r => Err(Error(r)),
    }
}

/// Carries an Outcome out, as Go's kit does: the children only when the
/// reconcile did not fail (a failed reconcile's set may be partial, and
/// pruning by it would delete), the status whatever the answer (so a
/// failure can be a condition; skipped when the primary is gone: its
/// absent reconcile follows), the requeue only when all succeeded, zero
/// included, so an outcome without one clears the key's timer. The
/// first failure is the answer.
fn settle(o: &Outcome) -> std::result::Result<(), Fail> {
    let mut fail: Option<Fail> = o.failure.clone();
    if let (Some(c), None) = (&o.children, &fail) {
        match apply_children(c) {
            Err(e) => fail = Some(e.into()),
            Ok(f) if !f.is_empty() => {
                fail = Some(Fail::error(format!("children_apply: {} of {} children failed: {}", f.count, c.len(), f.lines.join("; "))))
            }
            Ok(_) => {}
        }
    }
    if let Some(s) = &o.status {
        match apply_status(s) {
            Err(e) if e.code != Error::ABSENT => {
                fail.get_or_insert(e.into());
            }
            _ => {}
        }
    }
    if fail.is_none() {
        // Under a millisecond is one, not zero (which would clear it).
        let d = if o.requeue_after > Duration::ZERO && o.requeue_after < Duration::from_millis(1) { Duration::from_millis(1) } else { o.requeue_after };
        if let Err(e) = requeue_after(d) {
            fail = Some(Fail::error(format!("reconcile_requeue_after {:?}: {}", o.requeue_after, e)));
        }
    }
    fail.map_or(Ok(()), Err)
}

/// ih_reconcile behind [`crate::plugin!`]'s `reconcile:`.
#[doc(hidden)]
pub fn export(len: i32, f: fn(&Request) -> crate::Result<Outcome>) -> i32 {
    crate::forget_call_error();
    let header = match crate::read_header(len) {
        Ok(h) => h,
        Err(e) => {
            crate::set_error(&format!("header_read: {}", e));
            return Code::Error as i32;
        }
    };
    match f(&Request { event: Event { header } }).and_then(|o| settle(&o)) {
        Ok(()) => Code::Ok as i32,
        Err(fail) => {
            if !fail.message.is_empty() {
                crate::set_error(&fail.message);
            }
            fail.code as i32
        }
    }
}
