;; clockrand: on every event stores the wall clock (8 bytes) and 8 random
;; bytes in state keys "t" and "r", so two replays can be compared.
(module
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
  (import "informer_host_v1" "state_set" (func $state_set (param i32 i32 i32 i32 i64) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "t")
  (data (i32.const 1) "r")
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param i32) (result i32)
    (drop (call $clock (i32.const 0) (i64.const 1) (i32.const 64)))
    (drop (call $random (i32.const 72) (i32.const 8)))
    (drop (call $state_set (i32.const 0) (i32.const 1) (i32.const 64) (i32.const 8) (i64.const -1)))
    (drop (call $state_set (i32.const 1) (i32.const 1) (i32.const 72) (i32.const 8) (i64.const -1)))
    (i32.const 0))
)
