//! The host's imports, exactly as abi/ABI.md section 6 declares them. On a
//! wasm target they are the real imports of module `informer_host_v1`;
//! elsewhere (`cargo test`, `rustc --test` on the machine's own target)
//! they are the in-memory host of `fake`, so a plugin's logic is unit
//! tested without wasm.

#[cfg(target_arch = "wasm32")]
#[link(wasm_import_module = "informer_host_v1")]
extern "C" {
    pub fn header_read(ptr: *mut u8, len: i32) -> i32;
    pub fn object_read(which: i32, ptr: *mut u8, len: i32) -> i32;
    pub fn field_read(which: i32, path: *const u8, path_len: i32, ptr: *mut u8, len: i32) -> i64;
    pub fn config_read(ptr: *mut u8, len: i32) -> i32;
    pub fn set_error(ptr: *const u8, len: i32) -> i32;
    pub fn log(level: i32, ptr: *const u8, len: i32) -> i32;
    // Capabilities I (section 16), denied unless granted.
    pub fn cache_get(res: *const u8, res_len: i32, ns: *const u8, ns_len: i32, name: *const u8, name_len: i32) -> i32;
    pub fn cache_list(res: *const u8, res_len: i32, ns: *const u8, ns_len: i32, sel: *const u8, sel_len: i32, start: i32, ptr: *mut u8, len: i32) -> i64;
    pub fn cache_index(res: *const u8, res_len: i32, index: *const u8, index_len: i32, value: *const u8, value_len: i32, start: i32, ptr: *mut u8, len: i32) -> i64;
    pub fn state_get(key: *const u8, key_len: i32, ptr: *mut u8, len: i32, version_ptr: *mut i64) -> i32;
    pub fn state_set(key: *const u8, key_len: i32, val: *const u8, val_len: i32, if_version: i64) -> i64;
    pub fn state_delete(key: *const u8, key_len: i32, if_version: i64) -> i32;
    pub fn state_list(prefix: *const u8, prefix_len: i32, after: *const u8, after_len: i32, max: i32, ptr: *mut u8, len: i32) -> i64;
    pub fn metric_declare(kind: i32, ptr: *const u8, len: i32) -> i32;
    pub fn metric_add(id: i32, value: f64, labels: *const u8, labels_len: i32) -> i32;
    pub fn metric_set(id: i32, value: f64, labels: *const u8, labels_len: i32) -> i32;
    pub fn metric_observe(id: i32, value: f64, labels: *const u8, labels_len: i32) -> i32;
    // Since v1.2 (section 17).
    pub fn result_message(ptr: *mut u8, len: i32) -> i32;
    // Capabilities II (section 17), denied unless granted.
    pub fn k8s_write(op: i32, res: *const u8, res_len: i32, ns: *const u8, ns_len: i32, name: *const u8, name_len: i32, sub: *const u8, sub_len: i32,
        body: *const u8, body_len: i32, uid: *const u8, uid_len: i32, rv: *const u8, rv_len: i32, flags: i32) -> i32;
    pub fn event_record(which: i32, typ: i32, reason: *const u8, reason_len: i32, msg: *const u8, msg_len: i32) -> i32;
    pub fn http_request(up: *const u8, up_len: i32, method: *const u8, method_len: i32, path: *const u8, path_len: i32,
        headers: *const u8, headers_len: i32, body: *const u8, body_len: i32) -> i32;
    pub fn http_response_read(part: i32, ptr: *mut u8, len: i32) -> i32;
    // Since v1.4 (section 5, ih_handle_batch); imported only by a plugin
    // that asks for the batch export, so others still load on older hosts.
    pub fn batch_select(index: i32) -> i32;
    pub fn batch_result(code: i32) -> i32;
    // Since v1.5 (section 18, controller mode); imported only by a
    // plugin that exports ih_reconcile (plugin! with reconcile:).
    pub fn reconcile_requeue_after(millis: i64) -> i32;
    pub fn children_apply(ptr: *const u8, len: i32) -> i32;
    pub fn status_apply(ptr: *const u8, len: i32) -> i32;
}

#[cfg(not(target_arch = "wasm32"))]
pub use crate::fake::raw::*;
