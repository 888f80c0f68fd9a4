// Command etcd is etcd's own main, built from the module proxy because no
// prebuilt binary can be downloaded on the build machines.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
