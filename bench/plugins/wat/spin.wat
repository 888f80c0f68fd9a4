;; spin-wat: loops until its call deadline kills it (the isolation
;; benchmark's other bad sibling).
(module
  (memory (export "memory") 1)
  (global $n (mut i32) (i32.const 0))
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param i32) (result i32)
    (loop $forever
      (global.set $n (i32.add (global.get $n) (i32.const 1)))
      (br $forever))
    (i32.const 0)))
