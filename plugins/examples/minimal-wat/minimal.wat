;; minimal-wat: the smallest useful informer-host plugin, written by hand
;; in the WebAssembly text format. For every event it logs the event type
;; and the object's name, both read from the binary header:
;;
;;     update web-0
;;
;; No WASI, no start function, no allocator: a plain module with one
;; memory, one import and two exports (plus the ABI marker).
;;
;; Build (or `make plugins`):
;;
;;     wat2wasm -o build/plugins/minimal-wat.wasm plugins/examples/minimal-wat/minimal.wat
;;
;; Memory map: 0..31 event type words, 64.. the log line, 1024.. the header.
(module
  (import "informer_host_v1" "header_read" (func $header_read (param i32 i32) (result i32)))
  (import "informer_host_v1" "log" (func $log (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)

  ;; "add ", "update ", "delete ", "unknown " at fixed 8-byte slots
  (data (i32.const 0) "unknown add     update  delete  ")

  (func (export "informer_host_abi_v1"))

  (func (export "ih_handle") (param $len i32) (result i32)
    (local $type i32) (local $wlen i32) (local $name i32) (local $nlen i32)
    ;; The header must fit between 1024 and the end of the page.
    (if (i32.gt_u (local.get $len) (i32.const 64512)) (then (return (i32.const 2))))
    (if (i32.ne (call $header_read (i32.const 1024) (local.get $len)) (local.get $len))
      (then (return (i32.const 3))))
    ;; byte 1: event type 1..3; anything else is "unknown"
    (local.set $type (i32.load8_u (i32.const 1025)))
    (if (i32.gt_u (local.get $type) (i32.const 3)) (then (local.set $type (i32.const 0))))
    ;; word length: unknown 7, add 3, update 6, delete 6
    (local.set $wlen
      (select (i32.const 7)
        (select (i32.const 3) (i32.const 6) (i32.eq (local.get $type) (i32.const 1)))
        (i32.eqz (local.get $type))))
    ;; name: string 6, descriptor {offset, length} at header byte 8 + 6*8 = 56
    (local.set $name (i32.add (i32.const 1024) (i32.load (i32.const 1080))))
    (local.set $nlen (i32.load (i32.const 1084)))
    ;; the line buffer (64..1023) holds names of up to 900 bytes (k8s: 253)
    (if (i32.gt_u (local.get $nlen) (i32.const 900)) (then (local.set $nlen (i32.const 900))))
    ;; line = word + " " + name, at 64
    (memory.copy (i32.const 64) (i32.shl (local.get $type) (i32.const 3)) (local.get $wlen))
    (i32.store8 (i32.add (i32.const 64) (local.get $wlen)) (i32.const 32))
    (memory.copy (i32.add (i32.const 65) (local.get $wlen)) (local.get $name) (local.get $nlen))
    (drop (call $log (i32.const 1) (i32.const 64)
      (i32.add (i32.add (local.get $wlen) (i32.const 1)) (local.get $nlen))))
    (i32.const 0))
)
