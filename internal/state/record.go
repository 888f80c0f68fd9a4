package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
	"sync"
)

// The file's format, on top of bbolt's pages (which carry no checksums):
//
//   - one bbolt bucket per plugin, named by the plugin, holding its keys;
//     each value is a record: a little-endian u64 whose top byte is the
//     record format and whose low 56 bits are the key's version, a CRC32C
//     (Castagnoli) of the bucket's name, the key, that u64 and the value,
//     then the value. A changed byte of a key or value, or a record moved
//     to another key or bucket, fails its checksum;
//   - the host's meta bucket (metaBucket, a name no module file has),
//     holding the file's format and an index bucket with one checksummed
//     entry per plugin: the plugin's version reservation, its number of
//     keys and the sum of its records' checksums. A key lost or come back
//     (a page of another commit, a leaf's count changed) fails the count
//     or the sum; a plugin bucket lost fails its index entry. The format
//     record holds the index's number of entries and the sum of their
//     checksums, so an entry lost fails too.
//
// Files of hosts before this format (format 0) have no meta bucket and
// records of the version alone (u64, top bit clear) and the value. They
// load as they are and are rewritten in the current format at open.
const (
	fileFormat = 1
	// recTag is the top byte of a current record's first u64. A format-0
	// record's top bit is clear (its version is a positive int64), so the
	// two cannot be confused.
	recTag      = 0x80 | fileFormat
	recHdrSize  = 12 // tag+version u64, crc u32
	versionMask = 1<<56 - 1
	// MaxVersion is the highest version a key can have: versions share a
	// u64 with the record's format tag.
	MaxVersion int64 = versionMask

	metaBucket   = "\x00informer-host"
	metaFormat   = "format"
	metaIndex    = "buckets"
	indexRecLen  = 28 // reserved, keys, sum u64; crc u32
	formatRecLen = 24 // format u32, entries, sum u64; crc u32
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordCRC is the checksum of a record of key in bucket: of the lengths
// and bytes of bucket and key, the record's first u64 and the value.
func recordCRC(bucket, key string, version int64, value []byte) uint32 {
	// One buffer and two updates: each update has a fixed cost, and a
	// short name and key fit the pooled buffer (crc32's tables are
	// called through a function value, so its argument always escapes).
	hp := crcBufs.Get().(*[]byte)
	h := binary.LittleEndian.AppendUint32((*hp)[:0], uint32(len(bucket)))
	h = append(h, bucket...)
	h = binary.LittleEndian.AppendUint32(h, uint32(len(key)))
	h = append(h, key...)
	h = binary.LittleEndian.AppendUint64(h, uint64(recTag)<<56|uint64(version))
	c := crc32.Update(0, castagnoli, h)
	*hp = h
	crcBufs.Put(hp)
	return crc32.Update(c, castagnoli, value)
}

var crcBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// encodeRecord returns a new slice (bbolt keeps it until the commit).
func encodeRecord(e *entry) []byte {
	rec := make([]byte, 0, recHdrSize+len(e.value))
	rec = binary.LittleEndian.AppendUint64(rec, uint64(recTag)<<56|uint64(e.version))
	rec = binary.LittleEndian.AppendUint32(rec, e.crc)
	return append(rec, e.value...)
}

// decodeRecord reads key's record in bucket. legacy says the file is of
// format 0, whose records carry no checksum.
func decodeRecord(bucket, key string, rec []byte, legacy bool) (*entry, error) {
	if len(rec) < 8 {
		return nil, errors.New("a record shorter than its header")
	}
	word := binary.LittleEndian.Uint64(rec)
	if legacy {
		if word == 0 || word > versionMask {
			return nil, fmt.Errorf("record of format %#x in a file of format 0", word>>56)
		}
		e := &entry{version: int64(word), value: append([]byte(nil), rec[8:]...)}
		e.crc = recordCRC(bucket, key, e.version, e.value)
		return e, nil
	}
	if word>>56 != recTag || len(rec) < recHdrSize {
		return nil, fmt.Errorf("record of format %#x, want %#x", word>>56, recTag)
	}
	e := &entry{version: int64(word & versionMask), crc: binary.LittleEndian.Uint32(rec[8:]), value: append([]byte(nil), rec[recHdrSize:]...)}
	if e.version == 0 || recordCRC(bucket, key, e.version, e.value) != e.crc {
		return nil, errors.New("checksum mismatch")
	}
	return e, nil
}

// index is a plugin's entry in the meta bucket's index.
type index struct {
	// reserved is the highest version that may have been handed out:
	// the bucket hands out none above it before this entry says so.
	reserved int64
	keys     uint64
	sum      uint64 // of the records' checksums, mod 2^64
}

func indexCRC(name string, b []byte) uint32 {
	var n [4]byte
	c := crc32.Update(0, castagnoli, binary.LittleEndian.AppendUint32(n[:0], uint32(len(name))))
	c = crc32.Update(c, castagnoli, []byte(name))
	return crc32.Update(c, castagnoli, b)
}

func (x index) encode(name string) []byte {
	b := make([]byte, 0, indexRecLen)
	b = binary.LittleEndian.AppendUint64(b, uint64(x.reserved))
	b = binary.LittleEndian.AppendUint64(b, x.keys)
	b = binary.LittleEndian.AppendUint64(b, x.sum)
	return binary.LittleEndian.AppendUint32(b, indexCRC(name, b))
}

func decodeIndex(name string, b []byte) (index, error) {
	if len(b) != indexRecLen || indexCRC(name, b[:24]) != binary.LittleEndian.Uint32(b[24:]) {
		return index{}, fmt.Errorf("index entry of plugin %q: checksum mismatch", name)
	}
	x := index{reserved: int64(binary.LittleEndian.Uint64(b)), keys: binary.LittleEndian.Uint64(b[8:]), sum: binary.LittleEndian.Uint64(b[16:])}
	if x.reserved < 0 || x.reserved > MaxVersion {
		return index{}, fmt.Errorf("index entry of plugin %q: reservation %d out of range", name, x.reserved)
	}
	return x, nil
}

// formatRecord is the meta bucket's format record: the format, and the
// index's number of entries and sum of their checksums.
func formatRecord(entries, sum uint64) []byte {
	b := binary.LittleEndian.AppendUint32(make([]byte, 0, formatRecLen), fileFormat)
	b = binary.LittleEndian.AppendUint64(b, entries)
	b = binary.LittleEndian.AppendUint64(b, sum)
	return binary.LittleEndian.AppendUint32(b, indexCRC(metaFormat, b))
}

// loadedFile is what a checked file holds.
type loadedFile struct {
	buckets map[string]*Bucket
	// floors are the reservations of plugins whose bucket was dropped:
	// a bucket of the same name starts above them.
	floors map[string]int64
	// legacy: a format-0 file, to be rewritten.
	legacy bool
}

// decodeFile checks the host's format in a parsed file and returns its
// buckets, which belong to s. Every error is a corruption.
func decodeFile(s *Store, root *boltBucket) (*loadedFile, error) {
	if len(root.kvs) > 0 {
		return nil, fmt.Errorf("a key %q outside any bucket", root.kvs[0].key)
	}
	lf := &loadedFile{buckets: map[string]*Bucket{}, floors: map[string]int64{}}
	meta := root.subs[metaBucket]
	var idx map[string]index
	if meta == nil {
		lf.legacy = true
	} else {
		var err error
		if idx, err = decodeMeta(meta); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(root.subs))
	for name := range root.subs {
		if name != metaBucket {
			names = append(names, name)
		}
	}
	sort.Strings(names) // the first error found is the same on every start
	for _, name := range names {
		bb := root.subs[name]
		if len(bb.subs) > 0 {
			return nil, fmt.Errorf("plugin %q: a bucket inside its bucket", name)
		}
		x, indexed := idx[name]
		if !lf.legacy && !indexed {
			return nil, fmt.Errorf("plugin %q: a bucket missing from the index", name)
		}
		b := newBucket(s, name)
		var sum uint64
		for _, kv := range bb.kvs {
			e, err := decodeRecord(name, string(kv.key), kv.value, lf.legacy)
			if err != nil {
				return nil, fmt.Errorf("plugin %q key %q: %w", name, kv.key, err)
			}
			b.put(string(kv.key), e)
			sum += uint64(e.crc)
		}
		if lf.legacy {
			b.seq = max(b.seq, int64(bb.seq&versionMask))
		} else {
			if x.keys != uint64(len(bb.kvs)) || x.sum != sum {
				return nil, fmt.Errorf("plugin %q: %d keys (checksum sum %#x), the index says %d (%#x): keys lost or come back",
					name, len(bb.kvs), sum, x.keys, x.sum)
			}
			if b.seq > x.reserved {
				return nil, fmt.Errorf("plugin %q: a key at version %d above the reservation %d", name, b.seq, x.reserved)
			}
			// Any version up to the reservation may have been handed
			// out before the host stopped: start above all of them.
			b.seq, b.reserved = x.reserved, x.reserved
		}
		lf.buckets[name] = b
	}
	for name, x := range idx {
		if _, ok := root.subs[name]; ok || name == metaBucket {
			continue
		}
		if x.keys != 0 {
			return nil, fmt.Errorf("plugin %q: the index lists %d keys, the bucket is missing", name, x.keys)
		}
		lf.floors[name] = x.reserved
	}
	return lf, nil
}

func decodeMeta(meta *boltBucket) (map[string]index, error) {
	if len(meta.kvs) != 1 || string(meta.kvs[0].key) != metaFormat {
		return nil, fmt.Errorf("meta bucket: %d keys, want only %q", len(meta.kvs), metaFormat)
	}
	v := meta.kvs[0].value
	if len(v) < 4 {
		return nil, errors.New("meta bucket: a short format record")
	}
	if f := binary.LittleEndian.Uint32(v); f != fileFormat {
		return nil, fmt.Errorf("file format %d; this host reads %d (written by a newer host?)", f, fileFormat)
	}
	if len(v) != formatRecLen || indexCRC(metaFormat, v[:formatRecLen-4]) != binary.LittleEndian.Uint32(v[formatRecLen-4:]) {
		return nil, errors.New("meta bucket: format record: checksum mismatch")
	}
	entries, sum := binary.LittleEndian.Uint64(v[4:]), binary.LittleEndian.Uint64(v[12:])
	ib := meta.subs[metaIndex]
	if len(meta.subs) != 1 || ib == nil || len(ib.subs) > 0 {
		return nil, errors.New("meta bucket: the index bucket is missing or not alone")
	}
	idx := make(map[string]index, len(ib.kvs))
	var got uint64
	for _, kv := range ib.kvs {
		x, err := decodeIndex(string(kv.key), kv.value)
		if err != nil {
			return nil, err
		}
		idx[string(kv.key)] = x
		got += uint64(binary.LittleEndian.Uint32(kv.value[indexRecLen-4:]))
	}
	if uint64(len(ib.kvs)) != entries || got != sum {
		return nil, fmt.Errorf("index: %d entries (checksum sum %#x), the format record says %d (%#x): entries lost or come back", len(ib.kvs), got, entries, sum)
	}
	return idx, nil
}
