package ociartifact

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// rawBlock is one tar header block written by hand: archive/tar's
// writer cannot write sparse headers, which is what these tests need.
func rawBlock(name string, typeflag byte, size int64, gnu bool, sparse [][2]int64, realSize int64) []byte {
	b := make([]byte, 512)
	copy(b[0:100], name)
	copy(b[100:108], "0000644\x00")
	copy(b[108:116], "0000000\x00")
	copy(b[116:124], "0000000\x00")
	copy(b[124:136], fmt.Sprintf("%011o\x00", size))
	copy(b[136:148], "00000000000\x00")
	b[156] = typeflag
	if gnu {
		copy(b[257:265], "ustar  \x00")
		for i, e := range sparse {
			off := 386 + i*24
			copy(b[off:off+12], fmt.Sprintf("%011o\x00", e[0]))
			copy(b[off+12:off+24], fmt.Sprintf("%011o\x00", e[1]))
		}
		copy(b[483:495], fmt.Sprintf("%011o\x00", realSize))
	} else {
		copy(b[257:263], "ustar\x00")
		copy(b[263:265], "00")
	}
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

func pad(b []byte) []byte {
	if n := len(b) % 512; n != 0 {
		b = append(b, make([]byte, 512-n)...)
	}
	return b
}

func paxRecord(k, v string) string {
	rec := " " + k + "=" + v + "\n"
	n := len(rec)
	for {
		s := fmt.Sprint(n) + rec
		if len(s) == n {
			return s
		}
		n = len(s)
	}
}

func blobName(b []byte) string {
	h := sha256.Sum256(b)
	return "blobs/sha256/" + hex.EncodeToString(h[:])
}

// layoutFiles is a one-module layout: a manifest of one layer (layers
// extra layers of the same size are listed too) plus extra files.
func layoutFiles(t *testing.T, layer []byte, layers int) (files map[string][]byte, order []string) {
	t.Helper()
	files = map[string][]byte{}
	add := func(name string, b []byte) {
		files[name] = b
		order = append(order, name)
	}
	config := []byte("{}")
	add(blobName(config), config)
	type desc struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Size      int64  `json:"size"`
	}
	d := func(mt string, b []byte) desc {
		return desc{mt, "sha256:" + strings.TrimPrefix(blobName(b), "blobs/sha256/"), int64(len(b))}
	}
	var ls []desc
	for i := 0; i < layers; i++ {
		l := append([]byte{byte(i)}, layer[1:]...)
		add(blobName(l), l)
		ls = append(ls, d("application/wasm", l))
	}
	m, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": d("application/vnd.wasm.config.v0+json", config), "layers": ls})
	add(blobName(m), m)
	idx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []desc{d("application/vnd.oci.image.manifest.v1+json", m)}})
	add("index.json", idx)
	add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	return files, order
}

func tarOf(files map[string][]byte, order []string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range order {
		tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[n]))})
		tw.Write(files[n])
	}
	tw.Close()
	return buf.Bytes()
}

func dirSize(t *testing.T, dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if i, err := d.Info(); err == nil {
				n += i.Size()
			}
		}
		return nil
	})
	return n
}

// A bundle writes at most what its index references,
// whole files only, within a stated total.
func TestExtractLayoutBounds(t *testing.T) {
	const max = 1 << 20
	good, order := layoutFiles(t, bytes.Repeat([]byte{1}, 1000), 1)
	goodTar := tarOf(good, order)
	end := make([]byte, 1024)

	gnuSparse := append(rawBlock(blobName([]byte("x")), tar.TypeGNUSparse, 512, true, [][2]int64{{max - 512, 512}}, max), make([]byte, 512)...)
	gnuSparse = append(gnuSparse, end...)

	pax := paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") +
		paxRecord("GNU.sparse.name", blobName([]byte("y"))) + paxRecord("GNU.sparse.realsize", fmt.Sprint(max))
	paxSparse := append(rawBlock("PaxHeaders/y", 'x', int64(len(pax)), false, nil, 0), pad([]byte(pax))...)
	data := pad([]byte(fmt.Sprintf("1\n%d\n1\n", max-1)))
	data = append(data, pad([]byte("z"))...)
	paxSparse = append(paxSparse, rawBlock("GNUSparseFile.0/y", tar.TypeReg, int64(len(data)), false, nil, 0)...)
	paxSparse = append(paxSparse, data...)
	paxSparse = append(paxSparse, end...)

	var many []string
	manyFiles := map[string][]byte{}
	for i := 0; i < maxBundleFiles+10; i++ {
		n := fmt.Sprintf("junk/%d", i)
		manyFiles[n] = nil
		many = append(many, n)
	}

	unref, uorder := layoutFiles(t, bytes.Repeat([]byte{1}, 1000), 1)
	junk := bytes.Repeat([]byte{7}, max)
	unref[blobName(junk)] = junk
	uorder = append([]string{blobName(junk)}, uorder...)

	over, oorder := layoutFiles(t, bytes.Repeat([]byte{1}, max), 4)

	for _, tc := range []struct {
		name    string
		tar     []byte
		wantErr []string // all in the error; none means it loads
		maxDisk int64
	}{
		{"GNU sparse", gnuSparse, []string{"sparse", "without sparse"}, 4096},
		{"PAX sparse", paxSparse, []string{"sparse", "without sparse"}, 4096},
		{"too many files", tarOf(manyFiles, many), []string{"more than 4096 files"}, 4096},
		{"unreferenced blob", tarOf(unref, uorder), nil, int64(len(goodTar))},
		{"over the total", tarOf(over, oorder), []string{"bound", "per module"}, 3*max + 8192},
		{"good", goodTar, nil, int64(len(goodTar))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			err := extractLayout(bytes.NewReader(tc.tar), dir, max)
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatalf("refused: %v", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v does not say %q", err, w)
				}
			}
			if n := dirSize(t, dir); n > tc.maxDisk {
				t.Errorf("wrote %d bytes, over %d", n, tc.maxDisk)
			}
		})
	}
}
