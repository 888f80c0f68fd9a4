;; trap-wat: traps on every event (the isolation benchmark's bad sibling).
(module
  (memory (export "memory") 1)
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param i32) (result i32) (unreachable)))
