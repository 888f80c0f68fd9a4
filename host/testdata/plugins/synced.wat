;; synced: poison (traps on a live event of an object whose name starts
;; with "pois", so a test can restart it) that also exports ih_synced and
;; logs "synced <resource name>" from the header the host gives it there.
;; For the host's sync-signal tests; the host's observer records the calls.
(module
  (import "informer_host_v1" "header_read" (func $header_read (param i32 i32) (result i32)))
  (import "informer_host_v1" "log" (func $log (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "synced ")
  (func (export "informer_host_abi_v1"))
  (func (export "ih_synced") (param $len i32)
    (local $h i32) (local $n i32)
    (local.set $h (i32.const 1024))
    (drop (call $header_read (local.get $h) (local.get $len)))
    ;; event type (byte 1) is 0 here; resource name is string 0: descriptor at 8
    (if (i32.ne (i32.load8_u (i32.add (local.get $h) (i32.const 1))) (i32.const 0)) (then unreachable))
    (local.set $n (i32.load (i32.add (local.get $h) (i32.const 12))))
    (memory.copy (i32.const 7)
      (i32.add (local.get $h) (i32.load (i32.add (local.get $h) (i32.const 8))))
      (local.get $n))
    (drop (call $log (i32.const 1) (i32.const 0) (i32.add (i32.const 7) (local.get $n)))))
  (func (export "ih_handle") (param $len i32) (result i32)
    (local $h i32)
    (local.set $h (i32.const 1024))
    (drop (call $header_read (local.get $h) (local.get $len)))
    (if (i32.and (i32.load8_u (i32.add (local.get $h) (i32.const 2))) (i32.const 1))
      (then (return (i32.const 0))))
    (if (i32.ge_u (i32.load (i32.add (local.get $h) (i32.const 60))) (i32.const 4))
      (then
        (if (i32.eq
              (i32.load (i32.add (local.get $h) (i32.load (i32.add (local.get $h) (i32.const 56)))))
              (i32.const 0x73696f70)) ;; "pois", little-endian
          (then unreachable))))
    (i32.const 0))
)
