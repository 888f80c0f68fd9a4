package host

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"k8s.io/apimachinery/pkg/api/resource"
)

// readModule reads the module file at path, up to limit bytes. Only a
// regular file is read, after resolving links: anything named *.wasm lands
// here, and reading a FIFO blocks until a writer comes (holding up start
// and shutdown), a link to /dev/zero never ends, and a directory is no
// module. The file is opened without blocking and checked again through
// the open descriptor, so a name swapped between the two checks is caught
// too, and it is read through a limit, so a file growing after the check
// is not read past it.
func readModule(path string, limit int64) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkModuleFile(st, limit); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := checkModuleFile(st, limit); err != nil {
		return nil, err
	}
	// One buffer of the file's size and a byte to see it grew: reading
	// by doubling would allocate about twice a large module, at the very
	// moment a load's memory peaks.
	r := io.LimitReader(f, limit+1)
	b := make([]byte, min(st.Size(), limit)+1)
	n, err := io.ReadFull(r, b)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		b = b[:n]
	case err != nil:
		return nil, err
	default: // it grew since the Stat: read the rest, still under the limit
		rest, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		b = append(b, rest...)
	}
	if int64(len(b)) > limit {
		return nil, tooBig("grown since it was checked", limit) // it grew since the check
	}
	return b, nil
}

// checkModuleFile refuses what readModule must not read.
func checkModuleFile(st fs.FileInfo, limit int64) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s, not a regular file; only regular files (or links to them) are loaded", fileKind(st.Mode()))
	}
	if st.Size() > limit {
		return tooBig(fmt.Sprintf("%d bytes", st.Size()), limit)
	}
	return nil
}

func tooBig(size string, limit int64) error {
	return fmt.Errorf("the file (%s) is over the limit of %s (%d bytes); raise plugins.maxModuleSize in the config to load it",
		size, resource.NewQuantity(limit, resource.BinarySI), limit)
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	default:
		return "an irregular file"
	}
}
