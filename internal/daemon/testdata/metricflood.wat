;; metricflood: fills its metric budget with the costliest series the ABI
;; allows, to flood /metrics (cmd/informer-host/obsflood_e2e_test.go).
;; ih_init declares a histogram of 64 buckets, a 90-byte name and four
;; label keys, then observes into new series, each with four label values
;; of 1023 bytes (4095 bytes of labels, the most one update takes), until
;; the host refuses one (ERR_QUOTA past the byte budget, METRIC_DROPPED past
;; the series cap) or 100000 series. The exported global "series" holds how
;; many it made, "last" the result that stopped it.
(module
  (import "informer_host_v1" "metric_declare" (func $metric_declare (param i32 i32 i32) (result i32)))
  (import "informer_host_v1" "metric_observe" (func $metric_observe (param i32 f64 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $series (export "series") (mut i32) (i32.const 0))
  (global $last (export "last") (mut i32) (i32.const 0))
  (data (i32.const 1024) "{\"name\":\"hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh\",\"help\":\"Series with the longest labels the ABI allows, as many as the host takes.\",\"labels\":[\"a\",\"b\",\"c\",\"d\"],\"buckets\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,64]}")

  (func (export "informer_host_abi_v1"))

  ;; nibble writes hex digit n of i (as 'A'..'P', valid UTF-8) at addr.
  (func $nibble (param $addr i32) (param $i i32) (param $n i32)
    (i32.store8 (local.get $addr)
      (i32.add (i32.const 0x41)
        (i32.and (i32.shr_u (local.get $i) (i32.mul (local.get $n) (i32.const 4))) (i32.const 15)))))

  (func (export "ih_init") (param $n i32) (result i32)
    (local $id i32) (local $i i32) (local $r i32)
    (local.set $id (call $metric_declare (i32.const 2) (i32.const 1024) (i32.const 406)))
    (if (i32.lt_s (local.get $id) (i32.const 0))
      (then (global.set $last (local.get $id)) (return (i32.const 0))))
    ;; the label values at 8192: four of 1023 bytes, zero-separated
    (memory.fill (i32.const 8192) (i32.const 0x76) (i32.const 4095))
    (i32.store8 (i32.const 9215) (i32.const 0))
    (i32.store8 (i32.const 10239) (i32.const 0))
    (i32.store8 (i32.const 11263) (i32.const 0))
    (block $done
      (loop $l
        (call $nibble (i32.const 8192) (local.get $i) (i32.const 0))
        (call $nibble (i32.const 8193) (local.get $i) (i32.const 1))
        (call $nibble (i32.const 8194) (local.get $i) (i32.const 2))
        (call $nibble (i32.const 8195) (local.get $i) (i32.const 3))
        (call $nibble (i32.const 8196) (local.get $i) (i32.const 4))
        (local.set $r (call $metric_observe (local.get $id) (f64.const 1) (i32.const 8192) (i32.const 4095)))
        (global.set $last (local.get $r))
        (br_if $done (i32.ne (local.get $r) (i32.const 0)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (global.set $series (local.get $i))
        (br_if $l (i32.lt_u (local.get $i) (i32.const 100000)))))
    (i32.const 0))

  (func (export "ih_handle") (param $len i32) (result i32) (i32.const 0))
)
