;; controller: a controller-mode plugin (ih_reconcile) for the replay's
;; reconcile tests. For a key whose primary is there it applies the
;; children at 4096 and the status at 8192 (JSON, ended by a zero byte)
;; and asks to be reconciled again after $requeue milliseconds; for an
;; absent key it applies no children. A controller function that fails
;; makes it answer RETRY. Tests change the data and $requeue to make
;; "a changed plugin".
(module
  (import "informer_host_v1" "header_read" (func $header_read (param i32 i32) (result i32)))
  (import "informer_host_v1" "reconcile_requeue_after" (func $requeue_after (param i64) (result i32)))
  (import "informer_host_v1" "children_apply" (func $children_apply (param i32 i32) (result i32)))
  (import "informer_host_v1" "status_apply" (func $status_apply (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 4096) "[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"copy\",\"namespace\":\"dst\"}}]")
  (data (i32.const 8192) "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"Copied\"}]}")
  (data (i32.const 12288) "[]")
  (global $requeue i64 (i64.const 60000))
  (func $strlen (param $p i32) (result i32)
    (local $n i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (i32.load8_u (i32.add (local.get $p) (local.get $n)))))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br $next)))
    (local.get $n))
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param i32) (result i32) (i32.const 0))
  (func (export "ih_reconcile") (param $len i32) (result i32)
    (drop (call $header_read (i32.const 32768) (local.get $len)))
    ;; flags: byte 2 of the header; 0x40 absent
    (if (i32.and (i32.load8_u (i32.const 32770)) (i32.const 0x40))
      (then
        (if (i32.ne (call $children_apply (i32.const 12288) (i32.const 2)) (i32.const 0))
          (then (return (i32.const 1))))
        (return (i32.const 0))))
    (if (i32.ne (call $children_apply (i32.const 4096) (call $strlen (i32.const 4096))) (i32.const 0))
      (then (return (i32.const 1))))
    (if (i32.ne (call $status_apply (i32.const 8192) (call $strlen (i32.const 8192))) (i32.const 0))
      (then (return (i32.const 1))))
    (drop (call $requeue_after (global.get $requeue)))
    (i32.const 0))
)
