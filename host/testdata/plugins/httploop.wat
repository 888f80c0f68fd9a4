;; httploop: ih_handle calls http_request (upstream "up", GET /) again
;; and again, whatever it returns, and never returns: a handler that
;; retries a failing request inside one call. Only the bounds on a call
;; besides callTimeout can stop it (abi/ABI.md §12). For the host's call
;; bounds test.
(module
  (import "informer_host_v1" "http_request"
    (func $http_request (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "upGET/")
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param i32) (result i32)
    (loop $again
      (drop (call $http_request
        (i32.const 0) (i32.const 2)   ;; "up"
        (i32.const 2) (i32.const 3)   ;; "GET"
        (i32.const 5) (i32.const 1)   ;; "/"
        (i32.const 0) (i32.const 0)   ;; no headers
        (i32.const 0) (i32.const 0))) ;; no body
      (br $again))
    (i32.const 0))
)
