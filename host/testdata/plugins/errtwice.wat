;; errtwice: answers ERROR to the first two events of objects whose name
;; starts with "erro", then OK, and OK to every other event: a handler
;; error that a retry gets past. For the host's ERROR-retry tests.
(module
  (import "informer_host_v1" "header_read" (func $header_read (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $errors (mut i32) (i32.const 0))
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param $len i32) (result i32)
    (local $h i32)
    (local.set $h (i32.const 1024))
    (drop (call $header_read (local.get $h) (local.get $len)))
    ;; name is string 6: descriptor {offset, length} at 56
    (if (i32.ge_u (i32.load (i32.add (local.get $h) (i32.const 60))) (i32.const 4))
      (then
        (if (i32.eq
              (i32.load (i32.add (local.get $h) (i32.load (i32.add (local.get $h) (i32.const 56)))))
              (i32.const 0x6f727265)) ;; "erro", little-endian
          (then
            (if (i32.lt_u (global.get $errors) (i32.const 2))
              (then
                (global.set $errors (i32.add (global.get $errors) (i32.const 1)))
                (return (i32.const 3))))))))
    (i32.const 0))
)
