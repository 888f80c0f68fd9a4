package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/informer-host/informer-host/config"
)

func validateCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	path := fs.String("config", "config.yaml", "config file to check")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok (%d resources)\n", *path, len(cfg.Resources))
	return 0
}
