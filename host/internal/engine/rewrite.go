package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/informer-host/informer-host/host/internal/wasmbin"
)

// rewrite returns wasm with injected termination checks (wasmbin.Instrument
// over its merged data segments). With a CacheDir, the rewritten module
// is kept there by the original's sha256 and read back on the next load:
// for a small Go plugin the rewrite is a third of a load from the warm
// compilation cache (MergeData and Instrument, about 45 ms of 130 ms),
// and what wazero does next cannot be skipped (it decodes and validates
// the module before it looks for its compiled code). The directory is as
// trusted as the compiled code beside it, and is named after the
// rewriter (rewriteFingerprint), so a host whose rewriter differs does not
// read another's.
func (e *Engine) rewrite(sum [sha256.Size]byte, wasm []byte) (*wasmbin.Instrumented, error) {
	var path string
	if e.rewriteDir != "" {
		path = filepath.Join(e.rewriteDir, hex.EncodeToString(sum[:]))
		if b, err := os.ReadFile(path); err == nil {
			if rw, err := decodeRewritten(b); err == nil {
				return rw, nil
			}
		}
	}
	rw, err := wasmbin.Instrument(wasmbin.MergeData(wasm))
	if err != nil || path == "" {
		return rw, err
	}
	// Best effort: without the record the next load rewrites again. Written
	// aside and renamed, so a reader never sees half of it.
	if os.MkdirAll(e.rewriteDir, 0o755) == nil {
		if f, err := os.CreateTemp(e.rewriteDir, ".tmp-*"); err == nil {
			_, werr := f.Write(encodeRewritten(rw))
			cerr := f.Close()
			if werr != nil || cerr != nil || os.Rename(f.Name(), path) != nil {
				_ = os.Remove(f.Name())
			}
		}
	}
	return rw, nil
}

// The record of a rewritten module: a header line
// "informer-host-rewritten <loops> <len(stop)> <len(start)>\n", the two
// export names, then the module; a sha256 of all that before it ends it,
// so a torn or altered record is rewritten rather than compiled.
const rewrittenMagic = "informer-host-rewritten"

func encodeRewritten(rw *wasmbin.Instrumented) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %d %d %d\n", rewrittenMagic, rw.Loops, len(rw.Stop), len(rw.Start))
	b.WriteString(rw.Stop)
	b.WriteString(rw.Start)
	b.Write(rw.Wasm)
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

func decodeRewritten(b []byte) (*wasmbin.Instrumented, error) {
	bad := errors.New("not a rewritten module record")
	if len(b) < sha256.Size {
		return nil, bad
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, bad
	}
	line, rest, ok := bytes.Cut(body, []byte{'\n'})
	if !ok {
		return nil, bad
	}
	f := bytes.Fields(line)
	if len(f) != 4 || string(f[0]) != rewrittenMagic {
		return nil, bad
	}
	var n [3]int
	for i := range n {
		v, err := strconv.Atoi(string(f[i+1]))
		if err != nil || v < 0 {
			return nil, bad
		}
		n[i] = v
	}
	if n[1]+n[2] > len(rest) {
		return nil, bad
	}
	return &wasmbin.Instrumented{Loops: n[0], Stop: string(rest[:n[1]]), Start: string(rest[n[1] : n[1]+n[2]]),
		Wasm: rest[n[1]+n[2]:]}, nil
}

// fingerprintModule is a reference module for rewriteFingerprint: a
// function that loops for ever and one that calls it, and a memory.
var fingerprintModule = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
	0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type: () -> ()
	0x03, 0x03, 0x02, 0x00, 0x00, // two functions of it
	0x05, 0x03, 0x01, 0x00, 0x01, // a memory of one page
	0x0a, 0x0e, 0x02, // code
	0x07, 0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b, // loop br 0 end end
	0x04, 0x00, 0x10, 0x00, 0x0b, // call 0 end
}

// rewriteFingerprint names the rewriter: wasmbin.RewriteVersion, the
// version of wazero (whose runtime the checks are written for) and a
// hash of the rewrite of fingerprintModule, which moves with most
// changes to the rewriter even if RewriteVersion was not raised.
func rewriteFingerprint() (string, error) {
	rw, err := wasmbin.Instrument(fingerprintModule)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(encodeRewritten(rw))
	return fmt.Sprintf("v%d-%s-%s", wasmbin.RewriteVersion, wazeroVersion(), hex.EncodeToString(sum[:6])), nil
}
