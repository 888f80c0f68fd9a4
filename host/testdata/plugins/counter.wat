;; counter: counts the objects it has been told about (add +1, delete -1)
;; and logs "count=N" after every event; a missed delete (flag 0x20: an
;; object a fresh instance never counted, deleted while the plugin was
;; away) leaves the count alone and logs "missed=M", the missed deletes
;; so far, instead; on shutdown it logs
;; "shutdown events=N", the number of events it handled. A fresh instance starts at zero
;; and rebuilds the count from the initial-list adds it receives, so its
;; count equals the cluster's object count whenever it is caught up. For
;; the host's reload tests.
(module
  (import "informer_host_v1" "header_read" (func $header_read (param i32 i32) (result i32)))
  (import "informer_host_v1" "log" (func $log (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $count (mut i32) (i32.const 0))
  (global $events (mut i32) (i32.const 0))
  (global $missed (mut i32) (i32.const 0))
  (data (i32.const 0) "count=")
  (data (i32.const 64) "shutdown events=")
  (data (i32.const 128) "missed=")
  (func (export "informer_host_abi_v1"))
  ;; itoa writes n (>= 0) in decimal at ptr and returns the length.
  (func $itoa (param $n i32) (param $ptr i32) (result i32)
    (local $len i32) (local $i i32) (local $t i32) (local $neg i32)
    (if (i32.lt_s (local.get $n) (i32.const 0))
      (then
        (local.set $neg (i32.const 1))
        (i32.store8 (local.get $ptr) (i32.const 0x2d))
        (local.set $ptr (i32.add (local.get $ptr) (i32.const 1)))
        (local.set $n (i32.sub (i32.const 0) (local.get $n)))))
    ;; count the digits
    (local.set $t (local.get $n))
    (loop $digits
      (local.set $len (i32.add (local.get $len) (i32.const 1)))
      (local.set $t (i32.div_u (local.get $t) (i32.const 10)))
      (br_if $digits (i32.ne (local.get $t) (i32.const 0))))
    ;; write them from the end
    (local.set $i (local.get $len))
    (loop $write
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (i32.store8 (i32.add (local.get $ptr) (local.get $i))
        (i32.add (i32.const 0x30) (i32.rem_u (local.get $n) (i32.const 10))))
      (local.set $n (i32.div_u (local.get $n) (i32.const 10)))
      (br_if $write (i32.ne (local.get $i) (i32.const 0))))
    (i32.add (local.get $len) (local.get $neg)))
  (func (export "ih_handle") (param $len i32) (result i32)
    (local $type i32)
    (drop (call $header_read (i32.const 1024) (local.get $len)))
    (local.set $type (i32.load8_u (i32.const 1025)))
    (global.set $events (i32.add (global.get $events) (i32.const 1)))
    (if (i32.and (i32.eq (local.get $type) (i32.const 3))
          (i32.ne (i32.and (i32.load8_u (i32.const 1026)) (i32.const 0x20)) (i32.const 0)))
      (then
        (global.set $missed (i32.add (global.get $missed) (i32.const 1)))
        (drop (call $log (i32.const 1) (i32.const 128)
          (i32.add (i32.const 7) (call $itoa (global.get $missed) (i32.const 135)))))
        (return (i32.const 0))))
    (if (i32.eq (local.get $type) (i32.const 1))
      (then (global.set $count (i32.add (global.get $count) (i32.const 1)))))
    (if (i32.eq (local.get $type) (i32.const 3))
      (then (global.set $count (i32.sub (global.get $count) (i32.const 1)))))
    (drop (call $log (i32.const 1) (i32.const 0)
      (i32.add (i32.const 6) (call $itoa (global.get $count) (i32.const 6)))))
    (i32.const 0))
  (func (export "ih_shutdown")
    (drop (call $log (i32.const 1) (i32.const 64)
      (i32.add (i32.const 16) (call $itoa (global.get $events) (i32.const 80))))))
)
