;; object-wat: copies the whole object as JSON (object_read) into a 1 MiB
;; buffer on every event, growing its memory once if the object is larger.
;; The host encodes an event's object once and shares the bytes among
;; every plugin that asks: the fan-out benchmark's plugin.
(module
  (import "informer_host_v1" "object_read" (func $object_read (param i32 i32 i32) (result i32)))
  (memory (export "memory") 17)
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param $len i32) (result i32)
    (if (i32.gt_s (call $object_read (i32.const 0) (i32.const 65536) (i32.const 1048576)) (i32.const 1048576))
      (then (return (i32.const 2))))
    (i32.const 0)))
