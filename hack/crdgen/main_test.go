package main

import (
	"os"
	"testing"

	"github.com/informer-host/informer-host/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }
