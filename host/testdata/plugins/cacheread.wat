;; cacheread: on every event, reads ConfigMap "target" of the event's
;; namespace from the host's cache (resource "cms") and logs
;; "get=<data.v>" (or "get=<code>"), then lists the cms in the namespace
;; labelled role=x and logs "list=<total>" (or "list=<code>"). For the
;; cache grant tests: granted, it reads the cache; not granted, every call
;; returns ERR_DENIED (-8).
(module
  (import "informer_host_v1" "field_read" (func $field_read (param i32 i32 i32 i32 i32) (result i64)))
  (import "informer_host_v1" "log" (func $log (param i32 i32 i32) (result i32)))
  (import "informer_host_v1" "cache_get" (func $cache_get (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "informer_host_v1" "cache_list" (func $cache_list (param i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "cms")
  (data (i32.const 16) "target")
  (data (i32.const 32) "metadata.namespace")
  (data (i32.const 64) "data.v")
  (data (i32.const 80) "role=x")
  (data (i32.const 96) "get=")
  (data (i32.const 128) "list=")
  (func (export "informer_host_abi_v1"))
  ;; itoa writes n in decimal at ptr and returns the length.
  (func $itoa (param $n i32) (param $ptr i32) (result i32)
    (local $len i32) (local $i i32) (local $t i32) (local $neg i32)
    (if (i32.lt_s (local.get $n) (i32.const 0))
      (then
        (local.set $neg (i32.const 1))
        (i32.store8 (local.get $ptr) (i32.const 0x2d))
        (local.set $ptr (i32.add (local.get $ptr) (i32.const 1)))
        (local.set $n (i32.sub (i32.const 0) (local.get $n)))))
    (local.set $t (local.get $n))
    (loop $digits
      (local.set $len (i32.add (local.get $len) (i32.const 1)))
      (local.set $t (i32.div_u (local.get $t) (i32.const 10)))
      (br_if $digits (i32.ne (local.get $t) (i32.const 0))))
    (local.set $i (local.get $len))
    (loop $write
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (i32.store8 (i32.add (local.get $ptr) (local.get $i))
        (i32.add (i32.const 0x30) (i32.rem_u (local.get $n) (i32.const 10))))
      (local.set $n (i32.div_u (local.get $n) (i32.const 10)))
      (br_if $write (i32.ne (local.get $i) (i32.const 0))))
    (i32.add (local.get $len) (local.get $neg)))
  (func (export "ih_handle") (param $len i32) (result i32)
    (local $nslen i32) (local $h i32) (local $r i64) (local $n i32)
    ;; the event's namespace, at 2048
    (local.set $nslen (i32.wrap_i64 (call $field_read (i32.const 0) (i32.const 32) (i32.const 18) (i32.const 2048) (i32.const 256))))
    (local.set $h (call $cache_get (i32.const 0) (i32.const 3) (i32.const 2048) (local.get $nslen) (i32.const 16) (i32.const 6)))
    (if (i32.lt_s (local.get $h) (i32.const 0))
      (then (local.set $n (call $itoa (local.get $h) (i32.const 100))))
      (else
        (local.set $r (call $field_read (local.get $h) (i32.const 64) (i32.const 6) (i32.const 100) (i32.const 20)))
        (local.set $n (i32.wrap_i64 (local.get $r)))
        (if (i64.lt_s (local.get $r) (i64.const 0))
          (then (local.set $n (call $itoa (i32.wrap_i64 (local.get $r)) (i32.const 100)))))))
    (drop (call $log (i32.const 1) (i32.const 96) (i32.add (i32.const 4) (local.get $n))))
    (local.set $r (call $cache_list (i32.const 0) (i32.const 3) (i32.const 2048) (local.get $nslen)
      (i32.const 80) (i32.const 6) (i32.const 0) (i32.const 4096) (i32.const 4096)))
    (if (i64.lt_s (local.get $r) (i64.const 0))
      (then (local.set $n (call $itoa (i32.wrap_i64 (local.get $r)) (i32.const 133))))
      (else (local.set $n (call $itoa (i32.wrap_i64 (i64.shr_u (local.get $r) (i64.const 32))) (i32.const 133)))))
    (drop (call $log (i32.const 1) (i32.const 128) (i32.add (i32.const 5) (local.get $n))))
    (i32.const 0))
)
