package registrytest

import (
	"encoding/base64"
	"io"
	"log"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func nopLogger() *log.Logger { return log.New(io.Discard, "", 0) }
