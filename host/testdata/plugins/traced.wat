;; traced: on every event, one of each call a delivery's trace shows: a
;; JSON merge patch of the event's object (its config as the body) through
;; k8s_write, a Normal Event "Traced" on it through event_record, and a
;; POST to upstream "u" at /seen through http_request. It answers OK when
;; all three succeeded, ERROR otherwise. For the host's tracing test.
(module
  (import "informer_host_v1" "header_read" (func $header_read (param i32 i32) (result i32)))
  (import "informer_host_v1" "config_read" (func $config_read (param i32 i32) (result i32)))
  (import "informer_host_v1" "k8s_write"
    (func $k8s_write (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "informer_host_v1" "event_record" (func $event_record (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "informer_host_v1" "http_request" (func $http_request (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (data (i32.const 32) "Traced")
  (data (i32.const 48) "traced by the test")
  (data (i32.const 80) "u")
  (data (i32.const 88) "POST")
  (data (i32.const 96) "/seen")

  (func (export "informer_host_abi_v1"))

  ;; $str returns the address of header string i (header at 1024).
  (func $str (param $i i32) (result i32)
    (i32.add (i32.const 1024) (i32.load (i32.add (i32.const 1032) (i32.mul (local.get $i) (i32.const 8))))))
  (func $len (param $i i32) (result i32)
    (i32.load (i32.add (i32.const 1036) (i32.mul (local.get $i) (i32.const 8)))))

  (func (export "ih_handle") (param $hl i32) (result i32)
    (local $cl i32) (local $status i32)
    (if (i32.gt_u (local.get $hl) (i32.const 4096)) (then (return (i32.const 3))))
    (if (i32.ne (call $header_read (i32.const 1024) (local.get $hl)) (local.get $hl)) (then (return (i32.const 3))))
    (local.set $cl (call $config_read (i32.const 8192) (i32.const 16384)))
    (if (i32.gt_u (local.get $cl) (i32.const 16384)) (then (return (i32.const 3))))
    (if (i32.lt_s (call $k8s_write (i32.const 2)
          (call $str (i32.const 0)) (call $len (i32.const 0))
          (call $str (i32.const 5)) (call $len (i32.const 5))
          (call $str (i32.const 6)) (call $len (i32.const 6))
          (i32.const 0) (i32.const 0)
          (i32.const 8192) (local.get $cl)
          (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)
          (i32.const 0)) (i32.const 0))
      (then (return (i32.const 3))))
    (if (i32.ne (call $event_record (i32.const 0) (i32.const 0) (i32.const 32) (i32.const 6) (i32.const 48) (i32.const 18)) (i32.const 0))
      (then (return (i32.const 3))))
    (local.set $status (call $http_request
      (i32.const 80) (i32.const 1) (i32.const 88) (i32.const 4) (i32.const 96) (i32.const 5)
      (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))
    (if (i32.or (i32.lt_s (local.get $status) (i32.const 200)) (i32.ge_s (local.get $status) (i32.const 300)))
      (then (return (i32.const 3))))
    (i32.const 0)))
