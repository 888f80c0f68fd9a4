;; slow: sleeps 100ms in every event (WASI poll_oneoff on the monotonic
;; clock), then logs the object's name; logs "bye" on shutdown. A plugin
;; that always has a backlog, for the daemon's lost-lease test.
(module
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll_oneoff (param i32 i32 i32 i32) (result i32)))
  (import "informer_host_v1" "header_read" (func $header_read (param i32 i32) (result i32)))
  (import "informer_host_v1" "log" (func $log (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "bye")
  (func (export "informer_host_abi_v1"))
  (func $sleep
    ;; one clock subscription at 256 (48 bytes): userdata 0 at 256, tag 0
    ;; (clock) at 264, clock id 1 (monotonic) at 272, timeout at 280 (ns),
    ;; precision at 288, flags 0 (relative) at 296. The event goes to 512,
    ;; nevents to 600.
    (memory.fill (i32.const 256) (i32.const 0) (i32.const 48))
    (i32.store (i32.const 272) (i32.const 1))
    (i64.store (i32.const 280) (i64.const 100000000))
    (drop (call $poll_oneoff (i32.const 256) (i32.const 512) (i32.const 1) (i32.const 600))))
  (func (export "ih_handle") (param $len i32) (result i32)
    (local $h i32)
    (local.set $h (i32.const 1024))
    (drop (call $header_read (local.get $h) (local.get $len)))
    (call $sleep)
    ;; name is string 6: descriptor at 56
    (drop (call $log (i32.const 1)
      (i32.add (local.get $h) (i32.load (i32.add (local.get $h) (i32.const 56))))
      (i32.load (i32.add (local.get $h) (i32.const 60)))))
    (i32.const 0))
  (func (export "ih_shutdown")
    (drop (call $log (i32.const 1) (i32.const 16) (i32.const 3))))
)
