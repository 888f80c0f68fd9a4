//go:build !wasip1

package kit

import (
	"fmt"
	"os"

	"github.com/informer-host/informer-host/abi"
)

// noHost stands in for the host on platforms other than wasip1, where no
// host calls the plugin: reads report that there is no event, and logging
// goes to standard error.
type noHost struct{}

func defaultHost() hostAPI { return noHost{} }

func (noHost) headerRead([]byte) int32               { return abi.ErrNoEvent }
func (noHost) objectRead(int32, []byte) int32        { return abi.ErrNoEvent }
func (noHost) fieldRead(int32, string, []byte) int64 { return int64(abi.ErrNoEvent) }
func (noHost) configRead([]byte) int32               { return 0 }
func (noHost) setError(string) int32                 { return 0 }
func (noHost) log(level int32, msg string) int32 {
	fmt.Fprintf(os.Stderr, "%d %s\n", level, msg)
	return 0
}

// Off wasip1 there is no host to keep state: every call is denied.
var stateHost stateAPI = noHost{}

func (noHost) get(string, []byte, *int64) int32         { return abi.ErrDenied }
func (noHost) set(string, []byte, int64) int64          { return int64(abi.ErrDenied) }
func (noHost) del(string, int64) int32                  { return abi.ErrDenied }
func (noHost) list(string, string, int32, []byte) int64 { return int64(abi.ErrDenied) }
