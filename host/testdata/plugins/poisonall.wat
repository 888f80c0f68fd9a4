;; poisonall: traps on every event of an object whose name starts with
;; "pois", the initial-list adds of a restart's replay included, and
;; answers OK to everything else: a poison object that no restart gets
;; past. For the host's parking and failure-streak tests.
(module
  (import "informer_host_v1" "header_read" (func $header_read (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param $len i32) (result i32)
    (local $h i32)
    (local.set $h (i32.const 1024))
    (drop (call $header_read (local.get $h) (local.get $len)))
    ;; name is string 6: descriptor {offset, length} at 8 + 6*8 = 56
    (if (i32.ge_u (i32.load (i32.add (local.get $h) (i32.const 60))) (i32.const 4))
      (then
        (if (i32.eq
              (i32.load (i32.add (local.get $h) (i32.load (i32.add (local.get $h) (i32.const 56)))))
              (i32.const 0x73696f70)) ;; "pois", little-endian
          (then unreachable))))
    (i32.const 0))
)
