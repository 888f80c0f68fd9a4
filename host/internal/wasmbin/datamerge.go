package wasmbin

// Merging data segments (RATIONALE.md, "Data segments are
// merged").
//
// wazero keeps, for every instance, a slice entry per data segment of the
// module (ModuleInstance.DataInstances, for memory.init and data.drop),
// and the compiled module a decoded DataSegment per segment. Go's linker
// cuts its data at every short run of zeros: the benchmarks' small Go
// plugin has 40,143 segments (987 KB of data, the median gap 18 bytes),
// which is 944 KB of slice headers per instance. MergeData rewrites the
// data section into few segments, filling the small gaps with the zeros
// they hold anyway, before the module is compiled.
//
// It changes nothing a module can observe, and does nothing unless that
// is certain:
//   - no data count section: memory.init and data.drop, the only
//     instructions that name a segment by index, require one, so without
//     it no code refers to segment indexes and renumbering is invisible;
//   - every segment active, in memory 0, at an i32.const offset;
//   - a gap is filled only if it is small (mergeGap), the next segment
//     starts at or after the previous one's end, and no earlier segment
//     wrote into the gap (memory is zero before the first segment is
//     applied, so the zeros written there are what was there; segments
//     apply in order, so later ones overwrite as before);
//   - bounds: a merged segment covers exactly the bytes from its first
//     segment's offset to its last one's end, all of which lie between
//     bytes the originals wrote, so it is in bounds iff they all were.
// Anything else (passive segments, another memory, a global offset, an
// undecodable section) leaves the module as it is.

// mergeGap is the largest run of zeros filled in to join two segments.
const mergeGap = 256

// maxMergedRuns bounds the merged segments checked against every gap; a
// module with more runs is left with the rest unmerged.
const maxMergedRuns = 256

type dataRun struct {
	start, end uint64
	parts      [][]byte // the segments' bytes, with gaps as nil entries of gap length
	gaps       []uint64
}

// MergeData returns wasm with its data segments merged, or wasm itself.
func MergeData(wasm []byte) []byte {
	if len(wasm) < 8 {
		return wasm
	}
	r := &Reader{b: wasm, pos: 8}
	dataAt, dataEnd := -1, -1
	var dataBody []byte
	for r.pos < len(r.b) && r.err == nil {
		at := r.pos
		id := r.Byte()
		body := r.Bytes(r.U32())
		switch id {
		case 12:
			return wasm // data count: code may name segments
		case 11:
			dataAt, dataEnd, dataBody = at, r.pos, body
		}
	}
	if r.err != nil || dataAt < 0 {
		return wasm
	}
	merged, ok := mergeSegments(dataBody)
	if !ok {
		return wasm
	}
	out := make([]byte, 0, len(wasm)-len(dataBody)+len(merged))
	out = append(out, wasm[:dataAt]...)
	out = append(out, 11)
	out = append(out, uleb(uint64(len(merged)))...)
	out = append(out, merged...)
	return append(out, wasm[dataEnd:]...)
}

// mergeSegments returns the merged data section body, and false if the
// section is not one MergeData may touch or nothing would merge.
func mergeSegments(body []byte) ([]byte, bool) {
	r := &Reader{b: body}
	n := r.U32()
	var runs []*dataRun
	var cur *dataRun
	written := func(start, end uint64) bool { // does a finished run overlap [start, end)?
		for _, x := range runs {
			if x != cur && x.start < end && start < x.end {
				return true
			}
		}
		return false
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		if r.U32() != 0 { // not active in memory 0 with an offset expression
			return nil, false
		}
		if r.Byte() != 0x41 { // i32.const
			return nil, false
		}
		off := uint64(uint32(r.sleb(5)))
		if r.Byte() != 0x0b {
			return nil, false
		}
		init := r.Bytes(r.U32())
		if r.err != nil {
			return nil, false
		}
		end := off + uint64(len(init))
		if cur != nil && off >= cur.end && off-cur.end <= mergeGap && !written(cur.end, off) {
			if gap := off - cur.end; gap > 0 {
				cur.parts = append(cur.parts, nil)
				cur.gaps = append(cur.gaps, gap)
			}
			cur.parts = append(cur.parts, init)
			cur.gaps = append(cur.gaps, 0)
			cur.end = end
			continue
		}
		if len(runs) >= maxMergedRuns {
			cur = nil // past the bound: the rest stay one run each, never filled
			runs = append(runs, &dataRun{start: off, end: end, parts: [][]byte{init}, gaps: []uint64{0}})
			continue
		}
		cur = &dataRun{start: off, end: end, parts: [][]byte{init}, gaps: []uint64{0}}
		runs = append(runs, cur)
	}
	if r.err != nil || r.pos != len(body) || len(runs) == int(n) {
		return nil, false
	}
	out := uleb(uint64(len(runs)))
	for _, x := range runs {
		out = append(out, 0x00, 0x41)
		out = append(out, sleb(int64(int32(uint32(x.start))))...)
		out = append(out, 0x0b)
		out = append(out, uleb(x.end-x.start)...)
		for k, p := range x.parts {
			if p == nil {
				out = append(out, make([]byte, x.gaps[k])...)
				continue
			}
			out = append(out, p...)
		}
	}
	return out, true
}
