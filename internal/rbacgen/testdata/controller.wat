;; controller: the controller-mode plugin of the generated-RBAC test.
;; For a live primary it applies one ConfigMap named as the primary,
;; applies status {"phase":"Ready"} and asks for a requeue an hour later;
;; for an absent or deleting one it applies no children (the host prunes
;; them, then removes the finalizer). A failed write is answered ERROR with
;; the host's message, which the host logs.
(module
  (import "informer_host_v1" "header_read" (func $header_read (param i32 i32) (result i32)))
  (import "informer_host_v1" "reconcile_requeue_after" (func $requeue_after (param i64) (result i32)))
  (import "informer_host_v1" "children_apply" (func $children_apply (param i32 i32) (result i32)))
  (import "informer_host_v1" "status_apply" (func $status_apply (param i32 i32) (result i32)))
  (import "informer_host_v1" "result_message" (func $result_message (param i32 i32) (result i32)))
  (import "informer_host_v1" "set_error" (func $set_error (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 4096) "[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"")
  (data (i32.const 4200) "\"}}]")
  (data (i32.const 4300) "[]")
  (data (i32.const 4400) "{\"phase\":\"Ready\"}")
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param $len i32) (result i32) (i32.const 0))
  ;; fail answers ERROR with the last host call's message (at most 2 KiB).
  (func $fail (result i32)
    (local $n i32)
    (local.set $n (call $result_message (i32.const 16384) (i32.const 2048)))
    (if (i32.gt_u (local.get $n) (i32.const 2048)) (then (local.set $n (i32.const 2048))))
    (drop (call $set_error (i32.const 16384) (local.get $n)))
    (i32.const 3))
  (func (export "ih_reconcile") (param $len i32) (result i32)
    (local $h i32) (local $name i32) (local $nlen i32)
    (local.set $h (i32.const 1024))
    (drop (call $header_read (local.get $h) (local.get $len)))
    ;; absent (0x40) or deleting (0x80): no children
    (if (i32.and (i32.load8_u (i32.add (local.get $h) (i32.const 2))) (i32.const 0xc0))
      (then
        (if (i32.ne (call $children_apply (i32.const 4300) (i32.const 2)) (i32.const 0))
          (then (return (call $fail))))
        (return (i32.const 0))))
    ;; name is string 6: descriptor {offset, length} at 8 + 6*8 = 56
    (local.set $name (i32.add (local.get $h) (i32.load (i32.add (local.get $h) (i32.const 56)))))
    (local.set $nlen (i32.load (i32.add (local.get $h) (i32.const 60))))
    ;; prefix (59 bytes), the name, suffix (4 bytes) at 8192
    (memory.copy (i32.const 8192) (i32.const 4096) (i32.const 59))
    (memory.copy (i32.const 8251) (local.get $name) (local.get $nlen))
    (memory.copy (i32.add (i32.const 8251) (local.get $nlen)) (i32.const 4200) (i32.const 4))
    (if (i32.ne (call $children_apply (i32.const 8192) (i32.add (local.get $nlen) (i32.const 63))) (i32.const 0))
      (then (return (call $fail))))
    (if (i32.ne (call $status_apply (i32.const 4400) (i32.const 17)) (i32.const 0))
      (then (return (call $fail))))
    (drop (call $requeue_after (i64.const 3600000)))
    (i32.const 0))
)
