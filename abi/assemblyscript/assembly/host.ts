// The host's imports, exactly as abi/ABI.md section 6 declares them.

@external("informer_host_v1", "header_read")
export declare function header_read(ptr: usize, len: i32): i32;
@external("informer_host_v1", "object_read")
export declare function object_read(which: i32, ptr: usize, len: i32): i32;
@external("informer_host_v1", "field_read")
export declare function field_read(which: i32, path: usize, pathLen: i32, ptr: usize, len: i32): i64;
@external("informer_host_v1", "config_read")
export declare function config_read(ptr: usize, len: i32): i32;
@external("informer_host_v1", "set_error")
export declare function set_error(ptr: usize, len: i32): i32;
@external("informer_host_v1", "log")
export declare function log(level: i32, ptr: usize, len: i32): i32;

// Capabilities I (section 16), denied unless granted.
@external("informer_host_v1", "cache_get")
export declare function cache_get(res: usize, resLen: i32, ns: usize, nsLen: i32, name: usize, nameLen: i32): i32;
@external("informer_host_v1", "cache_list")
export declare function cache_list(res: usize, resLen: i32, ns: usize, nsLen: i32, sel: usize, selLen: i32, start: i32, ptr: usize, len: i32): i64;
@external("informer_host_v1", "cache_index")
export declare function cache_index(res: usize, resLen: i32, index: usize, indexLen: i32, value: usize, valueLen: i32, start: i32, ptr: usize, len: i32): i64;
@external("informer_host_v1", "state_get")
export declare function state_get(key: usize, keyLen: i32, ptr: usize, len: i32, versionPtr: usize): i32;
@external("informer_host_v1", "state_set")
export declare function state_set(key: usize, keyLen: i32, val: usize, valLen: i32, ifVersion: i64): i64;
@external("informer_host_v1", "state_delete")
export declare function state_delete(key: usize, keyLen: i32, ifVersion: i64): i32;
@external("informer_host_v1", "state_list")
export declare function state_list(prefix: usize, prefixLen: i32, after: usize, afterLen: i32, max: i32, ptr: usize, len: i32): i64;
@external("informer_host_v1", "metric_declare")
export declare function metric_declare(kind: i32, ptr: usize, len: i32): i32;
@external("informer_host_v1", "metric_add")
export declare function metric_add(id: i32, value: f64, labels: usize, labelsLen: i32): i32;
@external("informer_host_v1", "metric_set")
export declare function metric_set(id: i32, value: f64, labels: usize, labelsLen: i32): i32;
@external("informer_host_v1", "metric_observe")
export declare function metric_observe(id: i32, value: f64, labels: usize, labelsLen: i32): i32;

// Since v1.2 (section 17).
@external("informer_host_v1", "result_message")
export declare function result_message(ptr: usize, len: i32): i32;

// Capabilities II (section 17, since v1.2), denied unless granted.
@external("informer_host_v1", "k8s_write")
export declare function k8s_write(op: i32, res: usize, resLen: i32, ns: usize, nsLen: i32, name: usize, nameLen: i32,
  sub: usize, subLen: i32, body: usize, bodyLen: i32, uid: usize, uidLen: i32, rv: usize, rvLen: i32, flags: i32): i32;
@external("informer_host_v1", "event_record")
export declare function event_record(which: i32, type: i32, reason: usize, reasonLen: i32, msg: usize, msgLen: i32): i32;
@external("informer_host_v1", "http_request")
export declare function http_request(up: usize, upLen: i32, method: usize, methodLen: i32, path: usize, pathLen: i32,
  headers: usize, headersLen: i32, body: usize, bodyLen: i32): i32;
@external("informer_host_v1", "http_response_read")
export declare function http_response_read(part: i32, ptr: usize, len: i32): i32;

// Since v1.4 (section 5, ih_handle_batch). asc imports a function only
// when something reachable from the module's exports calls it: a plugin
// that does not re-export ih_handle_batch does not import these, and
// still loads on hosts older than v1.4.
@external("informer_host_v1", "batch_select")
export declare function batch_select(index: i32): i32;
@external("informer_host_v1", "batch_result")
export declare function batch_result(code: i32): i32;

// Since v1.5 (section 18, controller mode): imported only by a plugin
// that re-exports ih_reconcile.
@external("informer_host_v1", "reconcile_requeue_after")
export declare function reconcile_requeue_after(millis: i64): i32;
@external("informer_host_v1", "children_apply")
export declare function children_apply(ptr: usize, len: i32): i32;
@external("informer_host_v1", "status_apply")
export declare function status_apply(ptr: usize, len: i32): i32;
