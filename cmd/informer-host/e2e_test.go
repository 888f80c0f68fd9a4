package main

import (
	"os"
	"testing"

	"github.com/informer-host/informer-host/internal/testenv"
)

// env is the control plane the end-to-end tests of the commands share;
// the daemon's own are in internal/daemon.
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }
