;; httpbench: the HTTP upstream benchmark's guest. Every ih_handle posts
;; the 64-byte JSON body at 64 to path "/hook" of upstream "u" and reads
;; the response body: 0 when the upstream answered 2xx, 3 (error)
;; otherwise, so a benchmark that measures failures notices.
(module
  (import "informer_host_v1" "http_request" (func $http_request (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "informer_host_v1" "http_response_read" (func $http_response_read (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "u")
  (data (i32.const 8) "POST")
  (data (i32.const 16) "/hook")
  (data (i32.const 32) "Content-Type: application/json")
  (data (i32.const 64) "{\"namespace\":\"default\",\"pod\":\"web-000\",\"reason\":\"CrashLoopBack\"}")
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param $len i32) (result i32)
    (local $status i32)
    (local.set $status (call $http_request
      (i32.const 0) (i32.const 1) (i32.const 8) (i32.const 4) (i32.const 16) (i32.const 5)
      (i32.const 32) (i32.const 30) (i32.const 64) (i32.const 64)))
    (if (i32.or (i32.lt_s (local.get $status) (i32.const 200)) (i32.ge_s (local.get $status) (i32.const 300)))
      (then (return (i32.const 3))))
    (drop (call $http_response_read (i32.const 0) (i32.const 1024) (i32.const 1024)))
    (i32.const 0)))
