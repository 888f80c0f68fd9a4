package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
)

// This file reads a bbolt file from a byte slice, checking every page it
// uses, before bbolt itself is let near the file.
//
// bbolt trusts its pages: a corrupt page makes it panic ("invalid freelist
// page"), fault on a read past the end of its mapping (a fatal signal, not
// a panic), recurse without end on a branch that points back at an
// ancestor (a fatal stack overflow) or loop on a cursor. None of these can
// be recovered in process, and an open that dies at every start is a
// crash loop. So the host reads the file with ordinary reads (no mmap),
// walks it here with every offset bounds-checked and every page visited
// at most once, and opens it with bbolt only if the walk found nothing
// wrong. The checks are those of bbolt's own tx.Check (page types and
// ids, references counted once, key order, every page either reachable or
// free), done without trusting any of it, plus the meta pages' checksums.
//
// The layout is bbolt's (go.etcd.io/bbolt/internal/common), version 2:
// little-endian, a 16-byte header on every page, 16-byte elements.

const (
	pageHeaderSize = 16 // id u64, flags u16, count u16, overflow u32
	elemSize       = 16 // leaf: flags, pos, ksize, vsize u32; branch: pos, ksize u32, pgid u64
	bucketHdrSize  = 16 // a bucket's value: root pgid u64, sequence u64

	branchPage   = 0x01
	leafPage     = 0x02
	metaPage     = 0x04
	freelistPage = 0x10
	bucketLeaf   = 0x01 // a leaf element's flag: the value is a bucket

	boltMagic   = 0xED0CDAED
	boltVersion = 2
	noFreelist  = ^uint64(0)
	// metaSumLen is the part of a meta the checksum covers: magic..txid.
	metaSumLen = 56
	// maxBucketDepth bounds nesting: the root, a top-level bucket, and the
	// host's index bucket inside its meta bucket.
	maxBucketDepth = 3
)

// errEmptyFile is a file of zero bytes: bbolt would silently start it
// afresh, hiding that whatever was there is gone.
var errEmptyFile = errors.New("the file is empty (0 bytes)")

// boltBucket is one bucket of a parsed file: its sequence, its keys with
// their values and its sub-buckets. Keys and values alias the file's
// bytes.
type boltBucket struct {
	seq  uint64
	kvs  []boltKV
	subs map[string]*boltBucket
}

type boltKV struct{ key, value []byte }

// boltFile walks one file.
type boltFile struct {
	data     []byte
	pageSize uint64
	hwm      uint64 // the meta's page count: pages below it are in use or free
	seen     map[uint64]bool
}

type boltMeta struct {
	pageSize, flags uint32
	root, rootSeq   uint64
	freelist, pgid  uint64
	txid            uint64
}

// parseBolt checks data as a whole bbolt file and returns its root bucket.
func parseBolt(data []byte) (*boltBucket, error) {
	if len(data) == 0 {
		return nil, errEmptyFile
	}
	m0, err := readMeta(data, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("meta page 0: %w", err)
	}
	ps := uint64(m0.pageSize)
	if ps < 512 || ps > 1<<16 || ps&(ps-1) != 0 {
		return nil, fmt.Errorf("meta page 0: page size %d", ps)
	}
	m1, err := readMeta(data, ps, 1)
	if err != nil {
		return nil, fmt.Errorf("meta page 1: %w", err)
	}
	if m1.pageSize != m0.pageSize {
		return nil, fmt.Errorf("meta pages disagree on the page size: %d and %d", m0.pageSize, m1.pageSize)
	}
	// Each commit writes the meta page txid%2, so the two are always
	// consecutive; the newer is the file's state. An older one that fails
	// its checksum is a torn or damaged page: bbolt would fall back to it
	// silently, to a state older than the last commit.
	m := m0
	if m1.txid > m0.txid {
		m = m1
	}
	if d := int64(m0.txid - m1.txid); d != 1 && d != -1 {
		return nil, fmt.Errorf("meta pages are not of consecutive commits: txid %d and %d", m0.txid, m1.txid)
	}
	f := &boltFile{data: data, pageSize: ps, hwm: m.pgid, seen: map[uint64]bool{0: true, 1: true}}
	if m.pgid < 3 || m.pgid > uint64(len(data))/ps {
		return nil, fmt.Errorf("the file has %d bytes, too short for its %d pages of %d bytes (truncated?)", len(data), m.pgid, ps)
	}
	if m.root < 2 || m.root >= m.pgid {
		return nil, fmt.Errorf("root page %d out of range [2, %d)", m.root, m.pgid)
	}
	free, err := f.freelist(m.freelist)
	if err != nil {
		return nil, err
	}
	root := &boltBucket{seq: m.rootSeq}
	if err := f.walk(root, m.root, nil, 1); err != nil {
		return nil, err
	}
	for id := range free {
		if f.seen[id] {
			return nil, fmt.Errorf("page %d is both in use and free", id)
		}
	}
	for id := uint64(0); id < f.hwm; id++ {
		if !f.seen[id] && !free[id] {
			return nil, fmt.Errorf("page %d is neither in use nor free (a lost reference)", id)
		}
	}
	return root, nil
}

func readMeta(data []byte, off, id uint64) (boltMeta, error) {
	if uint64(len(data)) < off+pageHeaderSize+64 {
		return boltMeta{}, fmt.Errorf("the file has %d bytes, too short for it (truncated?)", len(data))
	}
	p := data[off:]
	if got := le64(p); got != id {
		return boltMeta{}, fmt.Errorf("page says it is page %d", got)
	}
	if fl := le16(p[8:]); fl != metaPage {
		return boltMeta{}, fmt.Errorf("not a meta page (flags %#x)", fl)
	}
	b := p[pageHeaderSize:]
	if le32(b) != boltMagic {
		return boltMeta{}, errors.New("not a bbolt file (bad magic)")
	}
	if v := le32(b[4:]); v != boltVersion {
		return boltMeta{}, fmt.Errorf("bbolt format version %d, not %d", v, boltVersion)
	}
	h := fnv.New64a()
	h.Write(b[:metaSumLen])
	if h.Sum64() != le64(b[metaSumLen:]) {
		return boltMeta{}, errors.New("checksum mismatch")
	}
	return boltMeta{
		pageSize: le32(b[8:]), flags: le32(b[12:]), root: le64(b[16:]), rootSeq: le64(b[24:]),
		freelist: le64(b[32:]), pgid: le64(b[40:]), txid: le64(b[48:]),
	}, nil
}

// page returns page id with its overflow pages, checked to lie in the
// file and below the high-water mark and to be of one of the types in
// want (a mask), and marks them used: a page reached twice is a corrupt
// file (and would be a cycle to bbolt).
func (f *boltFile) page(id uint64, want uint16) ([]byte, error) {
	if id < 2 || id >= f.hwm {
		return nil, fmt.Errorf("page %d out of range [2, %d)", id, f.hwm)
	}
	off := id * f.pageSize
	hdr := f.data[off:]
	if got := le64(hdr); got != id {
		return nil, fmt.Errorf("page %d says it is page %d", id, got)
	}
	if fl := le16(hdr[8:]); fl&want == 0 || fl&(fl-1) != 0 {
		return nil, fmt.Errorf("page %d: flags %#x, want one of %#x", id, fl, want)
	}
	over := uint64(le32(hdr[12:]))
	if over >= f.hwm-id {
		return nil, fmt.Errorf("page %d: %d overflow pages run past the last page %d", id, over, f.hwm-1)
	}
	for i := id; i <= id+over; i++ {
		if f.seen[i] {
			return nil, fmt.Errorf("page %d is referenced twice", i)
		}
		f.seen[i] = true
	}
	return f.data[off : off+(over+1)*f.pageSize], nil
}

func (f *boltFile) freelist(id uint64) (map[uint64]bool, error) {
	free := map[uint64]bool{}
	if id == noFreelist {
		return nil, errors.New("the file keeps no freelist (bbolt NoFreelistSync), which the host never writes")
	}
	p, err := f.page(id, freelistPage)
	if err != nil {
		return nil, fmt.Errorf("freelist: %w", err)
	}
	start, count := uint64(pageHeaderSize), uint64(le16(p[10:]))
	if count == 0xFFFF { // the count did not fit: it is the first element
		count = le64(p[pageHeaderSize:])
		start += 8
	}
	if count > (uint64(len(p))-start)/8 {
		return nil, fmt.Errorf("freelist page %d: %d ids do not fit in it", id, count)
	}
	for i := range count {
		fid := le64(p[start+8*i:])
		if fid < 2 || fid >= f.hwm || free[fid] {
			return nil, fmt.Errorf("freelist page %d: bad or repeated page id %d", id, fid)
		}
		free[fid] = true
	}
	return free, nil
}

// walk reads the tree of bucket b rooted at page root (or, root 0, the
// inline page), checking key order against [lo, hi) at every level. It
// keeps an explicit stack: the depth of a corrupt tree is not bounded by
// anything but the number of pages.
func (f *boltFile) walk(b *boltBucket, root uint64, inline []byte, depth int) error {
	type frame struct {
		page   []byte
		id     uint64
		lo, hi []byte
	}
	var stack []frame
	if root == 0 {
		stack = append(stack, frame{page: inline})
	} else {
		p, err := f.page(root, branchPage|leafPage)
		if err != nil {
			return err
		}
		stack = append(stack, frame{page: p, id: root})
	}
	for len(stack) > 0 {
		fr := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		p := fr.page
		flags, count := le16(p[8:]), uint64(le16(p[10:]))
		if uint64(len(p)) < pageHeaderSize+count*elemSize {
			return fmt.Errorf("page %d: %d elements do not fit in it", fr.id, count)
		}
		var prev []byte
		type child struct {
			id     uint64
			lo, hi []byte
		}
		var kids []child
		for i := range count {
			e := pageHeaderSize + i*elemSize
			var key, val []byte
			var eflags uint32
			var err error
			switch flags {
			case leafPage:
				eflags = le32(p[e:])
				key, val, err = elemKV(p, e, uint64(le32(p[e+4:])), uint64(le32(p[e+8:])), uint64(le32(p[e+12:])))
			case branchPage:
				key, _, err = elemKV(p, e, uint64(le32(p[e:])), uint64(le32(p[e+4:])), 0)
			default:
				err = fmt.Errorf("not a branch or leaf page (flags %#x)", flags)
			}
			if err != nil {
				return fmt.Errorf("page %d element %d: %w", fr.id, i, err)
			}
			if len(key) == 0 || (prev != nil && bytes.Compare(prev, key) >= 0) ||
				(fr.lo != nil && bytes.Compare(key, fr.lo) < 0) || (fr.hi != nil && bytes.Compare(key, fr.hi) >= 0) {
				return fmt.Errorf("page %d element %d: key out of order", fr.id, i)
			}
			prev = key
			if flags == branchPage {
				kids = append(kids, child{id: le64(p[e+8:]), lo: key, hi: fr.hi})
				if n := len(kids); n > 1 {
					kids[n-2].hi = key
				}
				continue
			}
			switch eflags {
			case 0:
				b.kvs = append(b.kvs, boltKV{key, val})
			case bucketLeaf:
				if err := f.subBucket(b, key, val, root == 0, depth); err != nil {
					return fmt.Errorf("bucket %q: %w", key, err)
				}
			default:
				return fmt.Errorf("page %d element %d: flags %#x", fr.id, i, eflags)
			}
		}
		if flags == branchPage && count == 0 {
			return fmt.Errorf("page %d: a branch without elements", fr.id)
		}
		// Reversed, so the stack visits children in key order.
		for i := len(kids) - 1; i >= 0; i-- {
			k := kids[i]
			cp, err := f.page(k.id, branchPage|leafPage)
			if err != nil {
				return err
			}
			stack = append(stack, frame{page: cp, id: k.id, lo: k.lo, hi: k.hi})
		}
	}
	return nil
}

// subBucket reads the bucket whose header is val, a value in b.
func (f *boltFile) subBucket(b *boltBucket, name, val []byte, inInline bool, depth int) error {
	if depth >= maxBucketDepth || inInline {
		// bbolt never writes an inline bucket holding buckets.
		return errors.New("nested too deep")
	}
	if len(val) < bucketHdrSize {
		return fmt.Errorf("a header of %d bytes", len(val))
	}
	if b.subs == nil {
		b.subs = map[string]*boltBucket{}
	}
	sub := &boltBucket{seq: le64(val[8:])}
	b.subs[string(name)] = sub
	root := le64(val)
	if root != 0 {
		return f.walk(sub, root, nil, depth+1)
	}
	inline := val[bucketHdrSize:]
	if len(inline) < pageHeaderSize || le16(inline[8:]) != leafPage {
		return errors.New("a bad inline page")
	}
	return f.walk(sub, 0, inline, depth+1)
}

// elemKV returns the key and value of the element at offset e of page p,
// whose data starts pos bytes after the element.
func elemKV(p []byte, e, pos, ksize, vsize uint64) (key, val []byte, err error) {
	start := e + pos
	if start+ksize+vsize > uint64(len(p)) { // u32 sums cannot overflow a u64
		return nil, nil, fmt.Errorf("data at %d+%d+%d runs past the page's %d bytes", start, ksize, vsize, len(p))
	}
	return p[start : start+ksize], p[start+ksize : start+ksize+vsize], nil
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
