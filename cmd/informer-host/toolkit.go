package main

import (
	"context"
	"io"
)

// toolkitCommand dispatches the plugin author's commands: one
// case in Main for all of them keeps Main's switch small.
func toolkitCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch args[0] {
	case "replay":
		return replayCommand(ctx, args[1:], stdout, stderr)
	case "record":
		return recordCommand(ctx, args[1:], stdout, stderr)
	case "new":
		return newCommand(ctx, args[1:], stdout, stderr)
	case "inspect":
		return inspectCommand(ctx, args[1:], stdout, stderr)
	}
	return 2
}
