;; report: tells upstream "u" of every event it is handed, as the soak's
;; checker does: it posts the event header (section 8: the type, the
;; flags, the object's namespace, name and resourceVersion) to /report and
;; answers OK when the upstream answered 2xx, RETRY otherwise (an error
;; code such as ERR_CANCELED included). The upstream folds the reports
;; into the plugin's view, so a test can see what the plugin acted on,
;; whatever the host believes it was handed. For the host's sharding
;; tests.
(module
  (import "informer_host_v1" "header_read" (func $header_read (param i32 i32) (result i32)))
  (import "informer_host_v1" "http_request" (func $http_request (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "u")
  (data (i32.const 8) "POST")
  (data (i32.const 16) "/report")
  (func (export "informer_host_abi_v1"))
  ;; The header goes at 1024; a page holds any header of the tests.
  (func (export "ih_handle") (param $len i32) (result i32)
    (local $status i32)
    (if (i32.gt_u (local.get $len) (i32.const 60000))
      (then (return (i32.const 3))))
    (drop (call $header_read (i32.const 1024) (local.get $len)))
    (local.set $status (call $http_request
      (i32.const 0) (i32.const 1) (i32.const 8) (i32.const 4) (i32.const 16) (i32.const 7)
      (i32.const 0) (i32.const 0) (i32.const 1024) (local.get $len)))
    (if (i32.or (i32.lt_s (local.get $status) (i32.const 200)) (i32.ge_s (local.get $status) (i32.const 300)))
      (then (return (i32.const 1))))
    (i32.const 0)))
