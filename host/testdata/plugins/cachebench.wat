;; cachebench: the cache read benchmarks' guest. Its config's first byte
;; picks what one ih_handle does: "n" nothing, "g" cache_get of
;; ConfigMap "cm-050" in the event's namespace (resource "cms") and one
;; field_read of data.v, "l" cache_list of every cm in the namespace
;; (100 keys). Any failure returns 3 (error), so a benchmark that measures
;; failures notices.
(module
  (import "informer_host_v1" "config_read" (func $config_read (param i32 i32) (result i32)))
  (import "informer_host_v1" "field_read" (func $field_read (param i32 i32 i32 i32 i32) (result i64)))
  (import "informer_host_v1" "cache_get" (func $cache_get (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "informer_host_v1" "cache_list" (func $cache_list (param i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (global $mode (mut i32) (i32.const 0))
  (global $nslen (mut i32) (i32.const 0))
  (data (i32.const 0) "cms")
  (data (i32.const 16) "cm-050")
  (data (i32.const 32) "metadata.namespace")
  (data (i32.const 64) "data.v")
  (func (export "informer_host_abi_v1"))
  (func (export "ih_init") (param $len i32) (result i32)
    (drop (call $config_read (i32.const 128) (i32.const 16)))
    ;; config is JSON: "n" -> byte 1 is the letter
    (global.set $mode (i32.load8_u (i32.const 129)))
    (i32.const 0))
  (func (export "ih_handle") (param $len i32) (result i32)
    (local $h i32) (local $r i64)
    (if (i32.eq (global.get $mode) (i32.const 0x6e)) (then (return (i32.const 0))))
    (if (i32.eqz (global.get $nslen))
      (then (global.set $nslen (i32.wrap_i64
        (call $field_read (i32.const 0) (i32.const 32) (i32.const 18) (i32.const 2048) (i32.const 256))))))
    (if (i32.eq (global.get $mode) (i32.const 0x67))
      (then
        (local.set $h (call $cache_get (i32.const 0) (i32.const 3) (i32.const 2048) (global.get $nslen) (i32.const 16) (i32.const 6)))
        (if (i32.lt_s (local.get $h) (i32.const 0)) (then (return (i32.const 3))))
        (local.set $r (call $field_read (local.get $h) (i32.const 64) (i32.const 6) (i32.const 256) (i32.const 64)))
        (if (i64.lt_s (local.get $r) (i64.const 0)) (then (return (i32.const 3))))
        (return (i32.const 0))))
    (local.set $r (call $cache_list (i32.const 0) (i32.const 3) (i32.const 2048) (global.get $nslen)
      (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 4096) (i32.const 8192)))
    (if (i64.ne (i64.shr_u (local.get $r) (i64.const 32)) (i64.const 100)) (then (return (i32.const 3))))
    (i32.const 0))
)
