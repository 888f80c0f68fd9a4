;; waitretry: answers RETRY to every live event of an object whose name
;; starts with "rtry" until it has handled an event of another object, then
;; OK. So its retried object can only succeed if other objects' events are
;; delivered while the retry waits out its backoff. For the host's
;; per-object retry test.
(module
  (import "informer_host_v1" "header_read" (func $header_read (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $others (mut i32) (i32.const 0))
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param $len i32) (result i32)
    (local $h i32)
    (local.set $h (i32.const 1024))
    (drop (call $header_read (local.get $h) (local.get $len)))
    (if (i32.and (i32.load8_u (i32.add (local.get $h) (i32.const 2))) (i32.const 1))
      (then (return (i32.const 0))))
    ;; name is string 6: descriptor {offset, length} at 56
    (if (i32.ge_u (i32.load (i32.add (local.get $h) (i32.const 60))) (i32.const 4))
      (then
        (if (i32.eq
              (i32.load (i32.add (local.get $h) (i32.load (i32.add (local.get $h) (i32.const 56)))))
              (i32.const 0x79727472)) ;; "rtry", little-endian
          (then
            (if (i32.eqz (global.get $others)) (then (return (i32.const 1))))
            (return (i32.const 0))))))
    (global.set $others (i32.const 1))
    (i32.const 0))
)
