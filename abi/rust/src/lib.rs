//! informer-host: the plugin ABI v1 (abi/ABI.md) for Rust, without
//! dependencies. It builds with Debian's rustc 1.63 (and later) for
//! `wasm32-wasi` (`wasm32-wasip1` from Rust 1.78) and
//! `wasm32-unknown-unknown`:
//!
//! ```text
//! rustc --edition 2021 --crate-type rlib   --target wasm32-wasi -O abi/rust/src/lib.rs -o libinformer_host.rlib
//! rustc --edition 2021 --crate-type cdylib --target wasm32-wasi -O -g -C strip=none \
//!       --extern informer_host=libinformer_host.rlib plugin.rs -o plugin.wasm
//! ```
//!
//! (or `cargo build --offline --release --target wasm32-wasi` with this
//! crate as a path dependency). A plugin is a `cdylib` that names its
//! functions with [`plugin!`]:
//!
//! ```ignore
//! fn handle(ev: &informer_host::Event) -> informer_host::Result {
//!     let phase = ev.get("status.phase").unwrap_or_default();
//!     informer_host::info!("{} {} phase={}", ev.event_type(), ev.key(), phase);
//!     Ok(())
//! }
//! informer_host::plugin!(handle: handle);
//! ```
//!
//! The kit gives: the exports (marker, `_initialize`, `ih_handle`, and
//! `ih_init`/`ih_synced`/`ih_shutdown`/`ih_handle_batch` when named), the header parser,
//! object and field reads with the size protocol (section 7), logging,
//! the capabilities of section 16 ([`cache`], [`state`], [`metrics`]),
//! those of section 17 ([`writes`], [`events`], [`http`], each failure a
//! [`CallError`] naming the call, with the host's message) and
//! [`result_message`], the self-write flag ([`Event::self_write`]) and
//! the configuration as JSON ([`config_json`], [`json`]), and controller
//! mode ([`reconcile`]: `plugin!(reconcile: f)`). Off wasm (`rustc --test`), the imports are an
//! in-memory host ([`fake`], with the host's controller loop,
//! `fake::Controller`) so a plugin's logic is unit tested natively.

use std::fmt;

pub mod raw;
pub mod fake;
mod header;
pub use header::{EventType, Header};

/// `ih_handle` results (section 10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    Ok = 0,
    Retry = 1,
    Drop = 2,
    Error = 3,
}

/// A host function's error: one of the negative codes of section 10.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error(pub i32);

impl Error {
    pub const ABSENT: Error = Error(-1);
    pub const NOT_FOUND: Error = Error(-2);
    pub const BAD_PATH: Error = Error(-3);
    pub const BOUNDS: Error = Error(-4);
    pub const INVALID: Error = Error(-5);
    pub const NO_EVENT: Error = Error(-6);
    pub const INTERNAL: Error = Error(-7);
    pub const DENIED: Error = Error(-8);
    pub const CONFLICT: Error = Error(-9);
    pub const QUOTA: Error = Error(-10);
    pub const EXISTS: Error = Error(-11);
    pub const FORBIDDEN: Error = Error(-12);
    pub const UNPROCESSABLE: Error = Error(-13);
    pub const RATE_LIMITED: Error = Error(-14);
    pub const TIMEOUT: Error = Error(-15);
    pub const UNAVAILABLE: Error = Error(-16);
    pub const TOO_LARGE: Error = Error(-17);
    pub const CANCELED: Error = Error(-18);
    /// An apply would change fields another field manager owns: force
    /// or report; no newer event settles it (v1.3).
    pub const FIELD_CONFLICT: Error = Error(-19);

    /// The code's name in abi/ABI.md, `ERR_NOT_FOUND`.
    pub fn name(self) -> &'static str {
        const NAMES: [&str; 19] = [
            "ERR_ABSENT", "ERR_NOT_FOUND", "ERR_BAD_PATH", "ERR_BOUNDS", "ERR_INVALID", "ERR_NO_EVENT",
            "ERR_INTERNAL", "ERR_DENIED", "ERR_CONFLICT", "ERR_QUOTA", "ERR_EXISTS", "ERR_FORBIDDEN",
            "ERR_UNPROCESSABLE", "ERR_RATE_LIMITED", "ERR_TIMEOUT", "ERR_UNAVAILABLE", "ERR_TOO_LARGE",
            "ERR_CANCELED", "ERR_FIELD_CONFLICT",
        ];
        match self.0 {
            -19..=-1 => NAMES[(-self.0 - 1) as usize],
            _ => "ERR_UNKNOWN",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for Error {}

/// A handler's verdict other than OK: the code and the message that goes
/// with it (`set_error`). `?` on a host [`Error`] or a `String` gives ERROR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fail {
    pub code: Code,
    pub message: String,
}

impl Fail {
    pub fn retry(msg: impl Into<String>) -> Fail {
        Fail { code: Code::Retry, message: msg.into() }
    }
    pub fn drop(msg: impl Into<String>) -> Fail {
        Fail { code: Code::Drop, message: msg.into() }
    }
    pub fn error(msg: impl Into<String>) -> Fail {
        Fail { code: Code::Error, message: msg.into() }
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        // A rate limit is worth a retry (section 10); anything else fails the event.
        let code = if e == Error::RATE_LIMITED { Code::Retry } else { Code::Error };
        // The failed cache, state or metrics call the code came from, when
        // the kit kept one, names the call in the message.
        let message = match take_call_error(e) {
            Some(c) => c.to_string(),
            None => e.name().to_string(),
        };
        Fail { code, message }
    }
}

thread_local! {
    // The last failed cache, state or metrics call of the export call:
    // those functions return a bare Error, a Copy code plugins match on
    // (Err(Error::CONFLICT)), so what the call was is kept beside it.
    static LAST_CALL_ERROR: std::cell::RefCell<Option<CallError>> = std::cell::RefCell::new(None);
}

/// The last cache, state or metrics call of the current export call that
/// failed with a code other than the expected ones (a cache miss, a
/// missing state key, a compare-and-swap conflict), as a [`CallError`]
/// naming the call: `cache_get secrets shop/token: ERR_DENIED`. `?` on
/// that call's [`Error`] takes it, for the handler's failure message (so
/// that a later error of the same code is not taken for it); this gives
/// it to a plugin that logs the error instead, before any `?`.
pub fn last_call_error() -> Option<CallError> {
    LAST_CALL_ERROR.with(|l| l.borrow().clone())
}

/// Takes the kept call error if it is the one of code e.
fn take_call_error(e: Error) -> Option<CallError> {
    LAST_CALL_ERROR.with(|l| {
        let mut l = l.borrow_mut();
        if l.as_ref().map(|c| c.code) == Some(e) {
            l.take()
        } else {
            None
        }
    })
}

/// Keeps the failure e of a cache, state or metrics call of function
/// unless it is one of expected, the outcomes a plugin checks for on
/// every event, which cost nothing: call builds the description only for
/// the others. The host sets no result message for these functions
/// (section 17 only), so none is read.
fn call_failed(function: &'static str, expected: &[Error], e: Error, call: impl FnOnce() -> String) -> Error {
    if !expected.contains(&e) {
        LAST_CALL_ERROR.with(|l| *l.borrow_mut() = Some(CallError { function, call: call(), code: e, message: String::new() }));
    }
    e
}

/// Forgets the kept call error: each export call starts without one, as
/// result_message does.
fn forget_call_error() {
    LAST_CALL_ERROR.with(|l| *l.borrow_mut() = None);
}

impl From<String> for Fail {
    fn from(m: String) -> Fail {
        Fail::error(m)
    }
}

impl From<&str> for Fail {
    fn from(m: &str) -> Fail {
        Fail::error(m)
    }
}

/// What a handler returns.
pub type Result<T = ()> = std::result::Result<T, Fail>;

fn check(r: i64) -> std::result::Result<i64, Error> {
    if r < 0 {
        Err(Error(r as i32))
    } else {
        Ok(r)
    }
}

/// Reads a value of unknown size by the size protocol (section 7): `call`
/// gets a buffer and returns the host's result, whose low 32 bits are the
/// value's size; the high 32 bits (a kind, a total, a count) are returned
/// with the bytes. The buffer grows until the value fits (values that
/// change between two calls, like a cache page, may need a third).
pub fn read_sized(mut call: impl FnMut(*mut u8, i32) -> i64) -> std::result::Result<(u32, Vec<u8>), Error> {
    let mut buf: Vec<u8> = vec![0; 256];
    loop {
        let r = check(call(buf.as_mut_ptr(), buf.len() as i32))?;
        let size = (r & 0xffff_ffff) as usize;
        if size <= buf.len() {
            buf.truncate(size);
            return Ok(((r >> 32) as u32, buf));
        }
        buf.resize(size, 0);
    }
}

/// Log levels of `log` (section 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

/// Logs one line; false when the host's rate limit dropped it.
pub fn log(level: Level, msg: &str) -> bool {
    unsafe { raw::log(level as i32, msg.as_ptr(), msg.len() as i32) == 0 }
}

/// `info!("pod {} is {}", key, phase)`: [`log`] at info with `format!`.
#[macro_export]
macro_rules! info { ($($t:tt)*) => { $crate::log($crate::Level::Info, &format!($($t)*)) } }
#[macro_export]
macro_rules! warn { ($($t:tt)*) => { $crate::log($crate::Level::Warn, &format!($($t)*)) } }
#[macro_export]
macro_rules! error { ($($t:tt)*) => { $crate::log($crate::Level::Error, &format!($($t)*)) } }
#[macro_export]
macro_rules! debug { ($($t:tt)*) => { $crate::log($crate::Level::Debug, &format!($($t)*)) } }

/// Sets the message of the current call's result (`set_error`).
pub fn set_error(msg: &str) {
    unsafe { raw::set_error(msg.as_ptr(), msg.len() as i32) };
}

/// The plugin's configuration, as the operator gave it (JSON is customary).
pub fn config() -> Vec<u8> {
    read_sized(|p, n| unsafe { raw::config_read(p, n) } as i64).map(|(_, b)| b).unwrap_or_default()
}

/// The plugin's configuration parsed as JSON ([`json::Value`]): what
/// Go plugins get with `kit.DecodeConfig(&v)`. An empty
/// configuration is `Value::Null`; one that is not JSON an error that
/// says where, for `ih_init` to refuse it with.
pub fn config_json() -> std::result::Result<json::Value, String> {
    let c = config();
    if c.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(json::Value::Null);
    }
    json::parse(&c).map_err(|e| format!("the configuration is not JSON: {}", e))
}

/// The message of the last capabilities II call of this export call (empty
/// after a success), section 17.
pub fn result_message() -> String {
    match read_sized(|p, n| unsafe { raw::result_message(p, n) } as i64) {
        Ok((_, b)) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => e.name().to_string(),
    }
}

/// The kind of a field's value (`field_read`, section 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    String = 1,
    Number = 2,
    Bool = 3,
    Null = 4,
    Object = 5,
    Array = 6,
    Unknown = 0,
}

impl Kind {
    fn of(k: u32) -> Kind {
        match k {
            1 => Kind::String,
            2 => Kind::Number,
            3 => Kind::Bool,
            4 => Kind::Null,
            5 => Kind::Object,
            6 => Kind::Array,
            _ => Kind::Unknown,
        }
    }
}

/// A field's value: a string's raw bytes, or the JSON text of anything else.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub kind: Kind,
    pub bytes: Vec<u8>,
}

impl Field {
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes).unwrap_or("")
    }
}

/// `which` of object_read and field_read: the event's object (0), its old
/// object (1), or a cache handle (>= 2).
fn read_field(which: i32, path: &str) -> std::result::Result<Field, Error> {
    let (kind, bytes) = read_sized(|p, n| unsafe { raw::field_read(which, path.as_ptr(), path.len() as i32, p, n) })?;
    Ok(Field { kind: Kind::of(kind), bytes })
}

fn read_object(which: i32) -> std::result::Result<Vec<u8>, Error> {
    read_sized(|p, n| unsafe { raw::object_read(which, p, n) } as i64).map(|(_, b)| b)
}

/// A field as text, None when the object or the path is not there.
fn get_field(which: i32, path: &str) -> Option<String> {
    read_field(which, path).ok().map(|f| String::from_utf8_lossy(&f.bytes).into_owned())
}

/// The event of one `ih_handle` call (or the binding of an `ih_synced`).
pub struct Event {
    header: Header,
}

impl Event {
    pub fn header(&self) -> &Header {
        &self.header
    }
    pub fn event_type(&self) -> EventType {
        self.header.event_type()
    }
    pub fn namespace(&self) -> &str {
        self.header.namespace()
    }
    pub fn name(&self) -> &str {
        self.header.name()
    }
    /// The object's store key: `namespace/name`, or `name` when cluster-scoped.
    pub fn key(&self) -> String {
        self.header.key()
    }
    /// The object is the result of one of this plugin's own writes
    /// (header flag 0x08): a controller answering it would be answering
    /// itself. Go's `Event.SelfWrite`.
    pub fn self_write(&self) -> bool {
        self.header.self_write()
    }
    /// An add of the initial list (or of the replay after a restart).
    pub fn initial_list(&self) -> bool {
        self.header.initial_list()
    }
    /// A delete that says the object moved to another replica of a
    /// sharding group, not out of the cluster.
    pub fn handed_over(&self) -> bool {
        self.header.handed_over()
    }
    /// A field of the object (section 9 paths: `metadata.labels["app"]`).
    pub fn field(&self, path: &str) -> std::result::Result<Field, Error> {
        read_field(0, path)
    }
    /// A field of the old object (updates only; `ERR_ABSENT` otherwise).
    pub fn old_field(&self, path: &str) -> std::result::Result<Field, Error> {
        read_field(1, path)
    }
    /// A field as text (a string's value, JSON for the rest); None if absent.
    pub fn get(&self, path: &str) -> Option<String> {
        get_field(0, path)
    }
    pub fn old_get(&self, path: &str) -> Option<String> {
        get_field(1, path)
    }
    /// The whole object as JSON (compact, keys sorted).
    pub fn object_json(&self) -> std::result::Result<Vec<u8>, Error> {
        read_object(0)
    }
    pub fn old_object_json(&self) -> std::result::Result<Vec<u8>, Error> {
        read_object(1)
    }
}

fn read_header(len: i32) -> std::result::Result<Header, Error> {
    let mut buf = vec![0u8; len.max(0) as usize];
    let n = unsafe { raw::header_read(buf.as_mut_ptr(), len) };
    if n < 0 {
        return Err(Error(n));
    }
    if n != len {
        return Err(Error::INTERNAL);
    }
    Header::parse(buf)
}

/// The functions behind [`plugin!`]'s exports. Not for direct use.
#[doc(hidden)]
pub mod export {
    use super::*;

    #[cfg(target_arch = "wasm32")]
    extern "C" {
        // Defined by wasm-ld: the module's constructors (wasi-libc's
        // among them on wasm32-wasi). Calling it from _initialize makes
        // the module a reactor: without a reference to it, wasm-ld wraps
        // every export of a cdylib in a call of the constructors and of
        // the destructors (a "command export"), so they would run around
        // every event.
        fn __wasm_call_ctors();
    }

    pub fn initialize() {
        #[cfg(target_arch = "wasm32")]
        unsafe {
            __wasm_call_ctors()
        };
        // A panic aborts the instance (a trap the host reports with the
        // wasm stack); the message goes to the host's log first, on
        // wasm32-unknown-unknown too, which has no stderr.
        std::panic::set_hook(Box::new(|info| {
            log(Level::Error, &format!("panic: {}", info));
        }));
    }

    pub fn handle(len: i32, f: fn(&Event) -> Result) -> i32 {
        forget_call_error();
        let header = match read_header(len) {
            Ok(h) => h,
            Err(e) => {
                set_error(&format!("header_read: {}", e));
                return Code::Error as i32;
            }
        };
        match f(&Event { header }) {
            Ok(()) => Code::Ok as i32,
            Err(fail) => {
                if !fail.message.is_empty() {
                    set_error(&fail.message);
                }
                fail.code as i32
            }
        }
    }

    /// ih_handle_batch (section 5): each of the count events the host
    /// hands at once is made current with batch_select, handled by f
    /// exactly as [`handle`] handles an event of ih_handle, and settled
    /// with its own result (and message) through batch_result before the
    /// next is selected; it returns how many were settled. A panic aborts
    /// the instance in the event being handled: the host keeps the results
    /// settled before it and fails that event alone (section 5, Failure).
    pub fn handle_batch(count: i32, f: fn(&Event) -> Result) -> i32 {
        for i in 0..count {
            let len = unsafe { raw::batch_select(i) };
            if len < 0 {
                // Not the host's protocol: settle what was settled.
                return i;
            }
            if unsafe { raw::batch_result(handle(len, f)) } != 0 {
                return i;
            }
        }
        count
    }

    /// The ih_handle of a plugin that is a controller only.
    pub fn not_a_handler() -> i32 {
        set_error("this plugin is a controller (it exports ih_reconcile): configure it with a controller: block (abi/ABI.md section 18)");
        Code::Error as i32
    }

    pub fn init(_len: i32, f: fn(&[u8]) -> std::result::Result<(), String>) -> i32 {
        forget_call_error();
        match f(&config()) {
            Ok(()) => 0,
            Err(msg) => {
                set_error(&msg);
                1
            }
        }
    }

    pub fn synced(len: i32, f: fn(&Header)) {
        forget_call_error();
        if let Ok(h) = read_header(len) {
            f(&h)
        }
    }
}

/// Defines the plugin's exports: `plugin!(handle: f)` or, for a
/// controller (section 18), `plugin!(reconcile: f)` with `f: fn(&reconcile::Request)
/// -> Result<reconcile::Outcome>` (see [`reconcile`]), `plugin!(handle: f)` with `f: fn(&Event)
/// -> Result`, and optionally `init: fn(&[u8]) -> Result<(), String>` (the
/// configuration; an Err refuses it with that message), `synced:
/// fn(&Header)` (the binding's initial list is handled, section 5),
/// `shutdown: fn()` and `batch: f` (the optional `ih_handle_batch`
/// export of ABI v1.4, f normally the same function as `handle`). It also
/// exports the ABI marker and `_initialize`.
///
/// `batch` is opt-in, as C's `IH_HANDLE_BATCH`: when events wait, the
/// host may then hand up to 64 in one call, and the kit calls f once per
/// event, in order, each settled with its own result; but every event of
/// a batch costs two host calls (batch_select, batch_result) where a
/// Rust export call alone is cheap, so a plugin is usually faster without
/// it (abi/RATIONALE.md, "Batches", has the figures). A plugin built
/// without it does not import batch_select and batch_result, and loads on
/// hosts older than v1.4.
#[macro_export]
macro_rules! plugin {
    (handle: $handle:expr $(, $key:ident: $f:expr)* $(,)?) => {
        $crate::__plugin_export!(common);
        #[no_mangle]
        pub extern "C" fn ih_handle(header_len: i32) -> i32 {
            $crate::export::handle(header_len, $handle)
        }
        $($crate::__plugin_export!($key: $f);)*
    };
    // A controller (section 18): ih_reconcile, and an ih_handle that the
    // host never calls on a plugin configured with a controller: block;
    // its answer says what is missing when one is not.
    (reconcile: $reconcile:expr $(, $key:ident: $f:expr)* $(,)?) => {
        $crate::__plugin_export!(common);
        #[no_mangle]
        pub extern "C" fn ih_handle(_header_len: i32) -> i32 {
            $crate::export::not_a_handler()
        }
        $crate::__plugin_export!(reconcile: $reconcile);
        $($crate::__plugin_export!($key: $f);)*
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __plugin_export {
    // The ABI marker and _initialize, which every plugin exports.
    (common) => {
        #[no_mangle]
        pub extern "C" fn informer_host_abi_v1() {}
        #[export_name = "_initialize"]
        pub extern "C" fn __informer_host_initialize() {
            $crate::export::initialize()
        }
    };
    (init: $f:expr) => {
        #[no_mangle]
        pub extern "C" fn ih_init(config_len: i32) -> i32 {
            $crate::export::init(config_len, $f)
        }
    };
    (synced: $f:expr) => {
        #[no_mangle]
        pub extern "C" fn ih_synced(header_len: i32) {
            $crate::export::synced(header_len, $f)
        }
    };
    (shutdown: $f:expr) => {
        #[no_mangle]
        pub extern "C" fn ih_shutdown() {
            ($f)()
        }
    };
    (reconcile: $f:expr) => {
        #[no_mangle]
        pub extern "C" fn ih_reconcile(header_len: i32) -> i32 {
            $crate::reconcile::export(header_len, $f)
        }
    };
    (batch: $f:expr) => {
        #[no_mangle]
        pub extern "C" fn ih_handle_batch(count: i32) -> i32 {
            $crate::export::handle_batch(count, $f)
        }
    };
}

/// Cache reads (capability `cache`, section 16.1): objects of the
/// resources the host watches, from its informers' caches.
pub mod cache {
    use super::*;

    /// An object from the cache, read field by field like the event's. Valid
    /// until the export call that got it returns.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Object(pub i32);

    impl Object {
        pub fn field(&self, path: &str) -> std::result::Result<Field, Error> {
            read_field(self.0, path)
        }
        pub fn get(&self, path: &str) -> Option<String> {
            get_field(self.0, path)
        }
        pub fn json(&self) -> std::result::Result<Vec<u8>, Error> {
            read_object(self.0)
        }
    }

    /// The object `namespace/name` of `resource` (the configured name);
    /// None when it is not in the cache.
    pub fn get(resource: &str, namespace: &str, name: &str) -> std::result::Result<Option<Object>, Error> {
        let r = unsafe {
            raw::cache_get(resource.as_ptr(), resource.len() as i32, namespace.as_ptr(), namespace.len() as i32,
                name.as_ptr(), name.len() as i32)
        };
        match r {
            -1 => Ok(None),
            r if r < 0 => Err(call_failed("cache_get", &[Error::NOT_FOUND], Error(r), || format!("{} {}", resource, key(namespace, name)))),
            h => Ok(Some(Object(h))),
        }
    }

    /// The keys of `resource` in `namespace` (empty: all) whose labels
    /// match `selector` (empty: all), sorted, every page.
    pub fn list(resource: &str, namespace: &str, selector: &str) -> std::result::Result<Vec<String>, Error> {
        pages(|start, p, n| unsafe {
            raw::cache_list(resource.as_ptr(), resource.len() as i32, namespace.as_ptr(), namespace.len() as i32,
                selector.as_ptr(), selector.len() as i32, start, p, n)
        })
        .map_err(|e| {
            call_failed("cache_list", MISSES, e, || {
                let mut c = resource.to_string();
                if !namespace.is_empty() {
                    c += &format!(" in {}", namespace);
                }
                if !selector.is_empty() {
                    c += &format!(" -l {}", selector);
                }
                c
            })
        })
    }

    /// The keys that index `index` ("namespace", or "owner" if granted)
    /// maps to `value`, sorted, every page.
    pub fn index(resource: &str, index: &str, value: &str) -> std::result::Result<Vec<String>, Error> {
        pages(|start, p, n| unsafe {
            raw::cache_index(resource.as_ptr(), resource.len() as i32, index.as_ptr(), index.len() as i32,
                value.as_ptr(), value.len() as i32, start, p, n)
        })
        .map_err(|e| call_failed("cache_index", MISSES, e, || format!("{} {}={}", resource, index, value)))
    }

    /// The codes of a read that found nothing.
    const MISSES: &[Error] = &[Error::ABSENT, Error::NOT_FOUND];

    /// namespace/name, or name when cluster-scoped.
    fn key(namespace: &str, name: &str) -> String {
        if namespace.is_empty() {
            name.to_string()
        } else {
            format!("{}/{}", namespace, name)
        }
    }

    /// The keys of the objects of `resource` owned by the object of `uid`.
    pub fn owned(resource: &str, uid: &str) -> std::result::Result<Vec<String>, Error> {
        index(resource, "owner", uid)
    }

    fn pages(mut call: impl FnMut(i32, *mut u8, i32) -> i64) -> std::result::Result<Vec<String>, Error> {
        let mut keys = Vec::new();
        loop {
            let start = keys.len() as i32;
            let (total, page) = read_sized(|p, n| call(start, p, n))?;
            let before = keys.len();
            keys.extend(page.split(|&b| b == b'\n').filter(|k| !k.is_empty()).map(|k| String::from_utf8_lossy(k).into_owned()));
            if keys.len() == before || keys.len() as u32 >= total {
                return Ok(keys);
            }
        }
    }

    /// A store key's namespace ("" when cluster-scoped) and name.
    pub fn split_key(key: &str) -> (&str, &str) {
        match key.find('/') {
            Some(i) => (&key[..i], &key[i + 1..]),
            None => ("", key),
        }
    }
}

/// The plugin's key-value state (capability `state`, section 16.2), kept
/// by the host across traps, restarts and reloads.
pub mod state {
    use super::*;

    /// `if_version` for an unconditional write or delete.
    pub const ANY_VERSION: i64 = -1;
    /// `if_version` of a write that creates the key only.
    pub const ABSENT: i64 = 0;

    /// The value and version of `key`; None when there is no such key.
    pub fn get(key: &[u8]) -> std::result::Result<Option<(Vec<u8>, i64)>, Error> {
        let mut version: i64 = 0;
        let vp: *mut i64 = &mut version;
        match read_sized(|p, n| unsafe { raw::state_get(key.as_ptr(), key.len() as i32, p, n, vp) } as i64) {
            Ok((_, v)) => Ok(Some((v, version))),
            Err(Error::ABSENT) => Ok(None),
            Err(e) => Err(call_failed("state_get", &[], e, || quoted(key))),
        }
    }

    /// A state key as errors show it: quoted, "phase/web".
    fn quoted(key: &[u8]) -> String {
        format!("{:?}", String::from_utf8_lossy(key))
    }

    /// Writes `key` unconditionally; returns its new version.
    pub fn set(key: &[u8], value: &[u8]) -> std::result::Result<i64, Error> {
        set_if(key, value, ANY_VERSION)
    }

    /// Writes `key` if it is at `version` ([`ABSENT`]: if it does not
    /// exist); `Error::CONFLICT` otherwise.
    pub fn set_if(key: &[u8], value: &[u8], version: i64) -> std::result::Result<i64, Error> {
        check(unsafe { raw::state_set(key.as_ptr(), key.len() as i32, value.as_ptr(), value.len() as i32, version) })
            .map_err(|e| call_failed("state_set", &[Error::CONFLICT], e, || quoted(key)))
    }

    /// Deletes `key`; false when there was no such key.
    pub fn delete(key: &[u8]) -> std::result::Result<bool, Error> {
        match delete_if(key, ANY_VERSION) {
            Ok(()) => Ok(true),
            Err(Error::ABSENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Deletes `key` if it is at `version`; `Error::CONFLICT` otherwise.
    pub fn delete_if(key: &[u8], version: i64) -> std::result::Result<(), Error> {
        check(unsafe { raw::state_delete(key.as_ptr(), key.len() as i32, version) } as i64)
            .map(|_| ())
            .map_err(|e| call_failed("state_delete", &[Error::ABSENT, Error::CONFLICT], e, || quoted(key)))
    }

    /// Up to `max` (1..=1000) keys starting with `prefix`, sorting after
    /// `after` (empty: from the first).
    pub fn list(prefix: &[u8], after: &[u8], max: i32) -> std::result::Result<Vec<Vec<u8>>, Error> {
        let (count, buf) = read_sized(|p, n| unsafe {
            raw::state_list(prefix.as_ptr(), prefix.len() as i32, after.as_ptr(), after.len() as i32, max, p, n)
        })
        .map_err(|e| call_failed("state_list", &[], e, || format!("prefix {} after {}", quoted(prefix), quoted(after))))?;
        parse_list(&buf, count)
    }

    /// Every key starting with `prefix`, page by page.
    pub fn keys(prefix: &[u8]) -> std::result::Result<Vec<Vec<u8>>, Error> {
        const PAGE: i32 = 1000;
        let mut out: Vec<Vec<u8>> = Vec::new();
        loop {
            let after = out.last().cloned().unwrap_or_default();
            let page = list(prefix, &after, PAGE)?;
            let n = page.len();
            out.extend(page);
            if n < PAGE as usize {
                return Ok(out);
            }
        }
    }

    /// Splits state_list's page: `count` entries of a u32 LE length and bytes.
    pub fn parse_list(buf: &[u8], count: u32) -> std::result::Result<Vec<Vec<u8>>, Error> {
        let mut out = Vec::with_capacity(count as usize);
        let mut at = 0usize;
        for _ in 0..count {
            let n = buf.get(at..at + 4).ok_or(Error::INTERNAL)?;
            let n = u32::from_le_bytes([n[0], n[1], n[2], n[3]]) as usize;
            out.push(buf.get(at + 4..at + 4 + n).ok_or(Error::INTERNAL)?.to_vec());
            at += 4 + n;
        }
        Ok(out)
    }
}

/// Plugin metrics (capability `metrics`, section 16.3), exported on the
/// host's /metrics as `informer_host_plugin_metric_<name>`.
pub mod metrics {
    use super::*;
    use std::sync::atomic::{AtomicI32, Ordering};

    const UNDECLARED: i32 = i32::MIN;

    /// A metric, declared on its first update:
    /// `static EVENTS: Metric = Metric::counter("events_total", "Events.", &["namespace"]);`
    pub struct Metric {
        kind: i32,
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
        buckets: &'static [f64],
        id: AtomicI32, // the id, a declaration's error code, or UNDECLARED
    }

    impl Metric {
        pub const fn counter(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Metric {
            Metric { kind: 0, name, help, labels, buckets: &[], id: AtomicI32::new(UNDECLARED) }
        }
        pub const fn gauge(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Metric {
            Metric { kind: 1, name, help, labels, buckets: &[], id: AtomicI32::new(UNDECLARED) }
        }
        /// Empty `buckets`: Prometheus' defaults.
        pub const fn histogram(name: &'static str, help: &'static str, buckets: &'static [f64], labels: &'static [&'static str]) -> Metric {
            Metric { kind: 2, name, help, labels, buckets, id: AtomicI32::new(UNDECLARED) }
        }

        /// The declaration's JSON (section 16.3).
        pub fn declaration(&self) -> String {
            let mut d = String::from("{\"name\":");
            json_string(&mut d, self.name);
            if !self.help.is_empty() {
                d.push_str(",\"help\":");
                json_string(&mut d, self.help);
            }
            if !self.labels.is_empty() {
                d.push_str(",\"labels\":[");
                for (i, l) in self.labels.iter().enumerate() {
                    if i > 0 {
                        d.push(',');
                    }
                    json_string(&mut d, l);
                }
                d.push(']');
            }
            if !self.buckets.is_empty() {
                d.push_str(",\"buckets\":[");
                for (i, b) in self.buckets.iter().enumerate() {
                    if i > 0 {
                        d.push(',');
                    }
                    d.push_str(&format!("{}", b));
                }
                d.push(']');
            }
            d.push('}');
            d
        }

        fn id(&self) -> std::result::Result<i32, Error> {
            let mut id = self.id.load(Ordering::Relaxed);
            if id == UNDECLARED {
                let d = self.declaration();
                id = unsafe { raw::metric_declare(self.kind, d.as_ptr(), d.len() as i32) };
                self.id.store(id, Ordering::Relaxed);
            }
            if id < 0 {
                Err(call_failed("metric_declare", &[], Error(id), || self.name.to_string()))
            } else {
                Ok(id)
            }
        }

        /// Adds `v` to a counter (v >= 0) or gauge. Ok(false): the host
        /// dropped the update at the plugin's series cap (METRIC_DROPPED).
        pub fn add(&self, v: f64, labels: &[&str]) -> std::result::Result<bool, Error> {
            self.update("metric_add", v, labels, |id, v, p, n| unsafe { raw::metric_add(id, v, p, n) })
        }
        pub fn set(&self, v: f64, labels: &[&str]) -> std::result::Result<bool, Error> {
            self.update("metric_set", v, labels, |id, v, p, n| unsafe { raw::metric_set(id, v, p, n) })
        }
        pub fn observe(&self, v: f64, labels: &[&str]) -> std::result::Result<bool, Error> {
            self.update("metric_observe", v, labels, |id, v, p, n| unsafe { raw::metric_observe(id, v, p, n) })
        }

        fn update(&self, function: &'static str, v: f64, labels: &[&str], op: impl Fn(i32, f64, *const u8, i32) -> i32) -> std::result::Result<bool, Error> {
            let id = self.id()?;
            let values = labels.join("\0");
            match op(id, v, values.as_ptr(), values.len() as i32) {
                0 => Ok(true),
                1 => Ok(false),
                r => Err(call_failed(function, &[], Error(r), || self.name.to_string())),
            }
        }
    }

    /// Appends `s` as a JSON string.
    pub fn json_string(out: &mut String, s: &str) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
    }
}

/// The failure of a capabilities II call (section 17): the host
/// function, what it was called on, its code and the message the host
/// gave with it ([`result_message`]), so that the text alone says what
/// failed and why:
/// `k8s_write apply configmaps demo/x: ERR_RATE_LIMITED: <message>`.
/// A failed cache, state or metrics call is one too, without a message
/// ([`last_call_error`]): `cache_get secrets shop/token: ERR_DENIED`.
/// `?` in a handler gives RETRY for a rate limit, a timeout, an
/// unavailable upstream or apiserver and a canceled call, ERROR
/// otherwise, with this as the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallError {
    /// "k8s_write", "event_record", "http_request", "http_response_read";
    /// "cache_get", "state_set", "metric_declare" and the other cache,
    /// state and metrics functions.
    pub function: &'static str,
    /// The arguments that tell the call apart: a write's op, resource and
    /// namespace/name, an Event's type, reason and object, a request's
    /// upstream, method and path; a cache read's resource and
    /// namespace/name, selector or index; a state key, quoted; a metric's
    /// name.
    pub call: String,
    pub code: Error,
    pub message: String,
}

impl CallError {
    fn of(function: &'static str, call: String, code: i32) -> CallError {
        CallError { function, call, code: Error(code), message: result_message() }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.function)?;
        if !self.call.is_empty() {
            write!(f, " {}", self.call)?;
        }
        if !self.function.is_empty() || !self.call.is_empty() {
            f.write_str(": ")?;
        }
        f.write_str(self.code.name())?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for CallError {}

impl From<CallError> for Fail {
    fn from(e: CallError) -> Fail {
        let retry = [Error::RATE_LIMITED, Error::TIMEOUT, Error::UNAVAILABLE, Error::CANCELED].contains(&e.code);
        Fail { code: if retry { Code::Retry } else { Code::Error }, message: e.to_string() }
    }
}

/// Kubernetes writes (capability `writes`, section 17.1, k8s_write): only
/// what the plugin's grants.writes covers; anything else is
/// `ERR_DENIED` without a request.
pub mod writes {
    use super::*;

    pub const CREATE: i32 = 1; // POST the body; verb create
    pub const MERGE_PATCH: i32 = 2; // JSON merge patch (RFC 7386); verb patch
    pub const JSON_PATCH: i32 = 3; // JSON patch (RFC 6902); verb patch
    pub const APPLY: i32 = 4; // server-side apply; verb apply
    pub const DELETE: i32 = 5; // DELETE, no body; verb delete
    /// Flag of an apply: take over fields another manager owns.
    pub const FORCE: i32 = 1;
    /// Flag of an apply: update only; `ERR_ABSENT` when the object is
    /// gone, never a create (v1.3).
    pub const MUST_EXIST: i32 = 2;

    /// The flags of an apply.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct ApplyOptions {
        /// Take over fields another manager owns (else `ERR_FIELD_CONFLICT`).
        pub force: bool,
        /// Update the object only: `ERR_ABSENT` when it is gone (v1.3).
        pub must_exist: bool,
    }

    /// The object a write acts on. `resource` is a granted resource as the
    /// grant names it: a configured name ("pods") or
    /// "group/version/resource" ("apps/v1/deployments").
    #[derive(Clone, Copy, Debug, Default)]
    pub struct Target<'a> {
        pub resource: &'a str,
        pub namespace: &'a str, // "" for a cluster-scoped object
        pub name: &'a str,      // a create may leave it to the body
        pub subresource: &'a str, // "" or "status"
    }

    /// Optional preconditions: the apiserver refuses the write with
    /// `ERR_CONFLICT` when the object's uid or resourceVersion differs.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct Preconditions<'a> {
        pub uid: &'a str,
        pub resource_version: &'a str,
    }

    /// k8s_write: a handle (>= 2) to the object the apiserver answered
    /// with, 0 after a delete.
    pub fn write(op: i32, t: &Target, body: &[u8], p: &Preconditions, flags: i32) -> std::result::Result<i32, CallError> {
        let r = unsafe {
            raw::k8s_write(op, t.resource.as_ptr(), t.resource.len() as i32, t.namespace.as_ptr(), t.namespace.len() as i32,
                t.name.as_ptr(), t.name.len() as i32, t.subresource.as_ptr(), t.subresource.len() as i32,
                body.as_ptr(), body.len() as i32, p.uid.as_ptr(), p.uid.len() as i32,
                p.resource_version.as_ptr(), p.resource_version.len() as i32, flags)
        };
        if r < 0 {
            Err(CallError::of("k8s_write", call(op, t, flags), r))
        } else {
            Ok(r)
        }
    }

    /// How errors and the fake name an op: "create", "merge-patch",
    /// "json-patch", "apply", "delete"; "" for another.
    pub fn op_name(op: i32) -> &'static str {
        match op {
            CREATE => "create",
            MERGE_PATCH => "merge-patch",
            JSON_PATCH => "json-patch",
            APPLY => "apply",
            DELETE => "delete",
            _ => "",
        }
    }

    /// A write as its error names it: "apply --force pods shop/web".
    fn call(op: i32, t: &Target, flags: i32) -> String {
        let mut s = match op_name(op) {
            "" => format!("op {}", op),
            n => n.to_string(),
        };
        if flags & FORCE != 0 {
            s.push_str(" --force");
        }
        if flags & MUST_EXIST != 0 {
            s.push_str(" --must-exist");
        }
        s.push(' ');
        s.push_str(t.resource);
        if !t.subresource.is_empty() {
            s.push('/');
            s.push_str(t.subresource);
        }
        match (t.namespace.is_empty(), t.name.is_empty()) {
            (false, false) => s.push_str(&format!(" {}/{}", t.namespace, t.name)),
            (false, true) => s.push_str(&format!(" in {}", t.namespace)),
            (true, false) => s.push_str(&format!(" {}", t.name)),
            (true, true) => {}
        }
        s
    }

    /// Creates the object `body` (JSON) describes; the created object,
    /// readable like a cached one until the handler returns.
    pub fn create(t: &Target, body: &[u8]) -> std::result::Result<cache::Object, CallError> {
        write(CREATE, t, body, &Preconditions::default(), 0).map(cache::Object)
    }
    pub fn merge_patch(t: &Target, patch: &[u8], p: &Preconditions) -> std::result::Result<cache::Object, CallError> {
        write(MERGE_PATCH, t, patch, p, 0).map(cache::Object)
    }
    /// A JSON patch: a JSON array of operations.
    pub fn json_patch(t: &Target, patch: &[u8], p: &Preconditions) -> std::result::Result<cache::Object, CallError> {
        write(JSON_PATCH, t, patch, p, 0).map(cache::Object)
    }
    /// Server-side applies `body` (apiVersion, kind, metadata.name) as
    /// field manager "informer-host/<plugin>"; `force` takes over fields
    /// another manager owns.
    pub fn apply(t: &Target, body: &[u8], force: bool, p: &Preconditions) -> std::result::Result<cache::Object, CallError> {
        apply_with(t, body, &ApplyOptions { force, must_exist: false }, p)
    }
    /// `apply` with all of an apply's options.
    pub fn apply_with(t: &Target, body: &[u8], o: &ApplyOptions, p: &Preconditions) -> std::result::Result<cache::Object, CallError> {
        let flags = if o.force { FORCE } else { 0 } | if o.must_exist { MUST_EXIST } else { 0 };
        write(APPLY, t, body, p, flags).map(cache::Object)
    }
    /// Deletes the object (`ERR_ABSENT`: it is gone already).
    pub fn delete(t: &Target, p: &Preconditions) -> std::result::Result<(), CallError> {
        write(DELETE, t, &[], p, 0).map(|_| ())
    }
}

/// Kubernetes Events (capability `events`, section 17.2, event_record).
pub mod events {
    use super::*;

    pub const NORMAL: i32 = 0;
    pub const WARNING: i32 = 1;

    /// Records an Event about the object `which` selects (0 the event's
    /// object, 1 its old object, a cache or write handle), attributed to
    /// the plugin. `reason`: a CamelCase word; `message`: up to 1 KiB. The
    /// host sends it in the background: Ok means queued.
    /// [`Event::record_event`] and [`cache::Object::record_event`] are the
    /// same on an object.
    pub fn record(which: i32, typ: i32, reason: &str, message: &str) -> std::result::Result<(), CallError> {
        let r = unsafe { raw::event_record(which, typ, reason.as_ptr(), reason.len() as i32, message.as_ptr(), message.len() as i32) };
        if r >= 0 {
            return Ok(());
        }
        let message = result_message();
        let mut call = format!("{} {}", match typ { NORMAL => "Normal".to_string(), WARNING => "Warning".to_string(), t => format!("type {}", t) }, reason);
        if let Some(name) = get_field(which, "metadata.name") {
            match get_field(which, "metadata.namespace") {
                Some(ns) if !ns.is_empty() => call.push_str(&format!(" about {}/{}", ns, name)),
                _ => call.push_str(&format!(" about {}", name)),
            }
        }
        Err(CallError { function: "event_record", call, code: Error(r), message })
    }
}

impl Event {
    /// Records a Kubernetes Event about the event's object ([`events::record`]).
    pub fn record_event(&self, typ: i32, reason: &str, message: &str) -> std::result::Result<(), CallError> {
        events::record(0, typ, reason, message)
    }
}

impl cache::Object {
    /// Records a Kubernetes Event about this object ([`events::record`]).
    pub fn record_event(&self, typ: i32, reason: &str, message: &str) -> std::result::Result<(), CallError> {
        events::record(self.0, typ, reason, message)
    }
}

/// HTTP to the upstreams the operator named (capability `http`, section
/// 17.3, http_request and http_response_read).
pub mod http {
    use super::*;

    /// Parts of a response (http_response_read).
    pub const BODY: i32 = 0;
    pub const HEADER: i32 = 1;

    /// An upstream's answer (5xx included: an answer is not an error).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Response {
        pub status: i32,
        /// (canonical name, value), sorted by name.
        pub header: Vec<(String, String)>,
        pub body: Vec<u8>,
    }

    impl Response {
        /// The first value of header `name` (canonical: "Content-Type").
        pub fn header_value(&self, name: &str) -> Option<&str> {
            self.header.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
        }
        pub fn text(&self) -> String {
            String::from_utf8_lossy(&self.body).into_owned()
        }
    }

    /// One part of the last response (`ERR_ABSENT` if the last request
    /// got none), size protocol.
    pub fn response_read(part: i32) -> std::result::Result<Vec<u8>, Error> {
        read_sized(|p, n| unsafe { raw::http_response_read(part, p, n) } as i64).map(|(_, b)| b)
    }

    /// Calls `upstream` with `method` (one it allows) and `path` ("" or
    /// starting with "/" or "?"), `header` as (name, value) pairs.
    /// Errors: `ERR_DENIED`, `ERR_INVALID` (path, header), `ERR_TOO_LARGE`,
    /// `ERR_TIMEOUT`, `ERR_UNAVAILABLE` (no answer), `ERR_RATE_LIMITED`
    /// (the plugin's concurrency bound), `ERR_CANCELED`.
    pub fn request(upstream: &str, method: &str, path: &str, header: &[(&str, &str)], body: &[u8]) -> std::result::Result<Response, CallError> {
        let mut h = String::new();
        for (k, v) in header {
            h.push_str(k);
            h.push_str(": ");
            h.push_str(v);
            h.push('\n');
        }
        let status = unsafe {
            raw::http_request(upstream.as_ptr(), upstream.len() as i32, method.as_ptr(), method.len() as i32,
                path.as_ptr(), path.len() as i32, h.as_ptr(), h.len() as i32, body.as_ptr(), body.len() as i32)
        };
        let call = format!("{} {} {}", upstream, method, path);
        if status < 0 {
            return Err(CallError::of("http_request", call, status));
        }
        let part = |p| {
            response_read(p).map_err(|e| CallError {
                function: "http_response_read",
                call: format!("{} of {}", if p == BODY { "body" } else { "header" }, call),
                code: e,
                message: String::new(),
            })
        };
        let body = part(BODY)?;
        let header = String::from_utf8_lossy(&part(HEADER)?)
            .lines()
            .filter_map(|l| l.split_once(": ").map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        Ok(Response { status, header, body })
    }

    /// POSTs `body` with the Content-Type `content_type`.
    pub fn post(upstream: &str, path: &str, content_type: &str, body: &[u8]) -> std::result::Result<Response, CallError> {
        request(upstream, "POST", path, &[("Content-Type", content_type)], body)
    }
    pub fn get(upstream: &str, path: &str) -> std::result::Result<Response, CallError> {
        request(upstream, "GET", path, &[], &[])
    }
}

pub mod json;
pub mod reconcile;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod reconcile_tests;
