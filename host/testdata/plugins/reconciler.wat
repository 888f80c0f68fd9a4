;; reconciler: a controller-mode plugin (ih_reconcile) for the host's
;; controller loop tests. What it answers depends on the first four bytes
;; of the key's name:
;;   "trap"  traps, unless the call replays the cache (initial-list flag):
;;           a restart's replay recovers
;;   "rtry"  RETRY
;;   "errr"  ERROR
;;   "requ"  on a replay DROP (so only a persisted timer brings the key
;;           back), else reconcile_requeue_after(1500 ms) and OK
;;   "kids"  children_apply: one Secret named as the key while the primary
;;           lives, none once it is absent or deleting; then OK
;;   else    OK
;; ih_handle is the stub every controller exports (never called).
(module
  (import "informer_host_v1" "header_read" (func $header_read (param i32 i32) (result i32)))
  (import "informer_host_v1" "reconcile_requeue_after" (func $requeue_after (param i64) (result i32)))
  (import "informer_host_v1" "children_apply" (func $children_apply (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  ;; the child's JSON around its name
  (data (i32.const 4096) "[{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"")
  (data (i32.const 4200) "\"}}]")
  (data (i32.const 4300) "[]")
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param $len i32) (result i32) (i32.const 0))
  (func (export "ih_reconcile") (param $len i32) (result i32)
    (local $h i32) (local $flags i32) (local $name i32) (local $nlen i32) (local $pre i32)
    (local.set $h (i32.const 1024))
    (drop (call $header_read (local.get $h) (local.get $len)))
    (local.set $flags (i32.load8_u (i32.add (local.get $h) (i32.const 2))))
    ;; name is string 6: descriptor {offset, length} at 8 + 6*8 = 56
    (local.set $name (i32.add (local.get $h) (i32.load (i32.add (local.get $h) (i32.const 56)))))
    (local.set $nlen (i32.load (i32.add (local.get $h) (i32.const 60))))
    (if (i32.lt_u (local.get $nlen) (i32.const 4)) (then (return (i32.const 0))))
    (local.set $pre (i32.load (local.get $name)))
    (if (i32.eq (local.get $pre) (i32.const 0x70617274)) ;; "trap"
      (then
        (if (i32.and (local.get $flags) (i32.const 1)) (then (return (i32.const 0))))
        unreachable))
    (if (i32.eq (local.get $pre) (i32.const 0x79727472)) ;; "rtry"
      (then (return (i32.const 1))))
    (if (i32.eq (local.get $pre) (i32.const 0x72727265)) ;; "errr"
      (then (return (i32.const 3))))
    (if (i32.eq (local.get $pre) (i32.const 0x75716572)) ;; "requ"
      (then
        (if (i32.and (local.get $flags) (i32.const 1)) (then (return (i32.const 2))))
        (drop (call $requeue_after (i64.const 1500)))
        (return (i32.const 0))))
    (if (i32.eq (local.get $pre) (i32.const 0x7364696b)) ;; "kids"
      (then
        ;; absent (0x40) or deleting (0x80): no children
        (if (i32.and (local.get $flags) (i32.const 0xc0))
          (then
            (if (i32.ne (call $children_apply (i32.const 4300) (i32.const 2)) (i32.const 0))
              (then (return (i32.const 1))))
            (return (i32.const 0))))
        ;; prefix (56 bytes), the name, suffix (4 bytes) at 8192
        (memory.copy (i32.const 8192) (i32.const 4096) (i32.const 56))
        (memory.copy (i32.const 8248) (local.get $name) (local.get $nlen))
        (memory.copy (i32.add (i32.const 8248) (local.get $nlen)) (i32.const 4200) (i32.const 4))
        (if (i32.ne (call $children_apply (i32.const 8192) (i32.add (local.get $nlen) (i32.const 60))) (i32.const 0))
          (then (return (i32.const 1))))
        (return (i32.const 0))))
    (i32.const 0))
)
