package blob

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
)

// Sorted runs: what a map task of a range shuffle (spec.ShuffleByRange)
// writes. It cannot know the partitions' boundaries when it writes (they
// come from every map task's keys), so it writes all of its records
// sorted by key in one object, as a TeraSort map does, with a sample of
// its keys in front; the reducers draw the boundaries from the samples of
// every committed run and read their key range of each
// (internal/executor/rangeshuffle). The object is the attempt's output
// part 0, written once with If-None-Match: *, like an indexed shuffle
// object; its bytes are
//
//	"BWRUN01\n"                 magic, 8 bytes
//	head                        uint32, big-endian: where the records start
//	S                           uint32: the samples
//	records                     uint64: the records in the run
//	size                        uint64: the object's size
//	S samples, each:
//	  index                     uint64: the record's position in the run
//	  offset                    uint64: the record's first byte
//	  key length                uint16
//	  key                       at most RunSampleKeyMax bytes
//	records                     "key\tvalue\n" lines (or "key\n"), sorted
//	                            by key (bytewise), equal keys in the order
//	                            written
//
// The samples are the records at evenly spaced positions, the first
// record always among them: each stands for the records from it to the
// next sample (its weight), and with its offset it is a sparse index, so
// a reader finds the bytes of a key range with one ranged GET, a sample's
// spacing of extra records at either end. A sample's key may be the
// record's key cut at RunSampleKeyMax bytes: a prefix sorts no later than
// the key, which keeps the index conservative (a range read may start
// earlier, never later) and a boundary drawn from it a valid one.
const RunMagic = "BWRUN01\n"

// runFixed is the size of the header before the samples.
const runFixed = 8 + 4 + 4 + 8 + 8

// RunSampleKeyMax bounds a sample's key, so a run's header stays small
// whatever its keys (DefaultRunSamples of them: at most ~280 KB).
const RunSampleKeyMax = 256

// DefaultRunSamples is how many keys a run samples (fewer if it holds
// fewer records). Reducers draw the boundaries from every run's samples:
// with M map tasks, M × 1,024 samples place N boundaries within about
// N / (M × 1,024) of a partition's share; and a reducer reads, of each
// run, at most two spacings (records / 1,024) more than its range.
const DefaultRunSamples = 1024

// ErrBadRun: an object listed as a range shuffle's sorted run does not
// hold the header this package writes.
var ErrBadRun = errors.New("malformed sorted run")

// RunSample is one sampled record of a sorted run.
type RunSample struct {
	Index  int64  // its position among the run's records
	Offset int64  // its first byte in the object
	Key    []byte // its key, or the key's first RunSampleKeyMax bytes
}

// RunHeader is a sorted run's header.
type RunHeader struct {
	Head    int64 // where the records start: the header's length
	Records int64
	Size    int64 // the object's size
	Samples []RunSample
}

// Weight is how many records sample i stands for: from it to the next
// sample, or to the run's end.
func (h *RunHeader) Weight(i int) int64 {
	if i+1 < len(h.Samples) {
		return h.Samples[i+1].Index - h.Samples[i].Index
	}
	return h.Records - h.Samples[i].Index
}

// RunKey is a record's key: its bytes up to the first tab, or the whole
// line without its newline.
func RunKey(line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	if i := bytes.IndexByte(line, '\t'); i >= 0 {
		return line[:i]
	}
	return line
}

// RunSamplePositions are the positions of the records a run of n records
// samples: at most s, evenly spaced, the first record among them.
func RunSamplePositions(n int64, s int) []int64 {
	if n <= 0 || s <= 0 {
		return nil
	}
	k := min(n, int64(s))
	out := make([]int64, k)
	for i := range k {
		out[i] = i * n / k // floor: 0 first, strictly increasing as k <= n
	}
	return out
}

// EncodeRunHeader returns the header of a run of records records whose
// samples are keys[i] at record positions idx[i] and bodyOffs[i] bytes
// into the records; the records' bytes total body. The samples' offsets
// it writes count from the object's start.
func EncodeRunHeader(records, body int64, idx, bodyOffs []int64, keys [][]byte) []byte {
	headLen := int64(runFixed)
	for _, k := range keys {
		headLen += 8 + 8 + 2 + int64(min(len(k), RunSampleKeyMax))
	}
	b := make([]byte, runFixed, headLen)
	copy(b, RunMagic)
	binary.BigEndian.PutUint32(b[8:], uint32(headLen))
	binary.BigEndian.PutUint32(b[12:], uint32(len(keys)))
	binary.BigEndian.PutUint64(b[16:], uint64(records))
	binary.BigEndian.PutUint64(b[24:], uint64(headLen+body))
	for i, k := range keys {
		k = k[:min(len(k), RunSampleKeyMax)]
		b = binary.BigEndian.AppendUint64(b, uint64(idx[i]))
		b = binary.BigEndian.AppendUint64(b, uint64(headLen+bodyOffs[i]))
		b = binary.BigEndian.AppendUint16(b, uint16(len(k)))
		b = append(b, k...)
	}
	return b
}

// RunHeadLen is how long the header is, from the object's first
// RunPrefixLen bytes.
func RunHeadLen(prefix []byte) (int64, error) {
	if len(prefix) < runFixed {
		return 0, fmt.Errorf("%d bytes, too short for a header: %w", len(prefix), ErrBadRun)
	}
	if string(prefix[:8]) != RunMagic {
		return 0, fmt.Errorf("no magic: %w", ErrBadRun)
	}
	return int64(binary.BigEndian.Uint32(prefix[8:])), nil
}

// RunPrefixLen is how many bytes RunHeadLen needs.
const RunPrefixLen = runFixed

// DecodeRunHeader decodes a run's header from head, its first bytes (at
// least the header's length), checking it is consistent: samples in
// order of position, offset and key, inside the records.
func DecodeRunHeader(head []byte) (RunHeader, error) {
	hl, err := RunHeadLen(head)
	if err != nil {
		return RunHeader{}, err
	}
	if hl < runFixed || int64(len(head)) < hl {
		return RunHeader{}, fmt.Errorf("header of %d bytes, %d read: %w", hl, len(head), ErrBadRun)
	}
	h := RunHeader{
		Head:    hl,
		Records: int64(binary.BigEndian.Uint64(head[16:])),
		Size:    int64(binary.BigEndian.Uint64(head[24:])),
	}
	n := int(binary.BigEndian.Uint32(head[12:]))
	if h.Records < 0 || h.Size < hl || n > DefaultRunSamples*64 || int64(n) > h.Records || (n == 0) != (h.Records == 0) {
		return RunHeader{}, fmt.Errorf("%d samples of %d records, %d bytes: %w", n, h.Records, h.Size, ErrBadRun)
	}
	b := head[runFixed:hl]
	h.Samples = make([]RunSample, n)
	for i := range n {
		if len(b) < 18 {
			return RunHeader{}, fmt.Errorf("sample %d cut short: %w", i, ErrBadRun)
		}
		s := RunSample{Index: int64(binary.BigEndian.Uint64(b)), Offset: int64(binary.BigEndian.Uint64(b[8:]))}
		kl := int(binary.BigEndian.Uint16(b[16:]))
		b = b[18:]
		if len(b) < kl || kl > RunSampleKeyMax {
			return RunHeader{}, fmt.Errorf("sample %d's key of %d bytes: %w", i, kl, ErrBadRun)
		}
		s.Key, b = b[:kl:kl], b[kl:]
		switch {
		case i == 0 && (s.Index != 0 || s.Offset != hl):
			return RunHeader{}, fmt.Errorf("first sample at record %d, byte %d: %w", s.Index, s.Offset, ErrBadRun)
		case s.Index < 0 || s.Index >= h.Records || s.Offset < hl || s.Offset >= h.Size:
			return RunHeader{}, fmt.Errorf("sample %d at record %d, byte %d: %w", i, s.Index, s.Offset, ErrBadRun)
		case i > 0 && (s.Index <= h.Samples[i-1].Index || s.Offset <= h.Samples[i-1].Offset || bytes.Compare(s.Key, h.Samples[i-1].Key) < 0):
			return RunHeader{}, fmt.Errorf("sample %d out of order: %w", i, ErrBadRun)
		}
		h.Samples[i] = s
	}
	if len(b) != 0 {
		return RunHeader{}, fmt.Errorf("%d bytes after the samples: %w", len(b), ErrBadRun)
	}
	return h, nil
}

// RunSpan is one record of a run's buffer: Len bytes at Off, its key
// the first KeyLen.
type RunSpan struct{ Off, Len, KeyLen uint32 }

// Key is the record's key in buf.
func (s RunSpan) Key(buf []byte) []byte { return buf[s.Off : s.Off+s.KeyLen] }

// RunBody is a sorted run's object: head, then the records spans name in
// buf, in their order, read without copying them into one buffer (the
// run may be as large as an attempt's buffered outputs). Seekable, as
// the SDK needs to sign and retry a PUT. Reads are fastest in order, as
// a PUT reads.
func RunBody(head, buf []byte, spans []RunSpan) (*io.SectionReader, int64) {
	size := int64(len(head))
	for _, r := range spans {
		size += int64(r.Len)
	}
	return io.NewSectionReader(&runBody{head: head, buf: buf, spans: spans}, 0, size), size
}

// runBody reads the records from a cursor: the record at i starts at pos,
// so reads in order cost no search, and a read before it (a retry's
// rewind) starts over.
type runBody struct {
	mu    sync.Mutex
	head  []byte
	buf   []byte
	spans []RunSpan
	i     int
	pos   int64
}

func (r *runBody) ReadAt(p []byte, off int64) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	if off < int64(len(r.head)) {
		k := copy(p, r.head[off:])
		n, p, off = k, p[k:], off+int64(k)
	}
	if off < r.pos || r.i == 0 {
		r.i, r.pos = 0, int64(len(r.head))
	}
	for len(p) > 0 && r.i < len(r.spans) {
		sp := r.spans[r.i]
		end := r.pos + int64(sp.Len)
		if off >= end {
			r.i, r.pos = r.i+1, end
			continue
		}
		k := copy(p, r.buf[int64(sp.Off)+off-r.pos:int64(sp.Off)+int64(sp.Len)])
		n, p, off = n+k, p[k:], off+int64(k)
	}
	if len(p) > 0 {
		return n, io.EOF
	}
	return n, nil
}

// MaxRunBytes bounds a run's records (RunSpan's 32-bit offsets): far
// above an attempt's cap on buffered outputs (tuning.MaxTaskOutput).
const MaxRunBytes = 1<<32 - 1

// SortRun sorts buf's records ("key\tvalue\n" lines; a last line without
// its newline must have had one added) by key, equal keys in buf's order,
// and returns the run's header with up to samples samples and the
// records' spans in run order: RunBody(head, buf, spans) is the object.
// It takes 12 bytes a record beside buf, which it does not copy.
func SortRun(buf []byte, samples int) (head []byte, spans []RunSpan, err error) {
	if int64(len(buf)) > MaxRunBytes {
		return nil, nil, fmt.Errorf("%d bytes of records; a sorted run holds at most %d", len(buf), int64(MaxRunBytes))
	}
	if len(buf) > 0 && buf[len(buf)-1] != '\n' {
		return nil, nil, fmt.Errorf("records end without a newline: %w", ErrBadRun)
	}
	spans = make([]RunSpan, 0, bytes.Count(buf, []byte{'\n'}))
	for off := 0; off < len(buf); {
		n := bytes.IndexByte(buf[off:], '\n') + 1
		line := buf[off : off+n]
		spans = append(spans, RunSpan{Off: uint32(off), Len: uint32(n), KeyLen: uint32(len(RunKey(line)))})
		off += n
	}
	// By key, then by position: equal keys stay in the order written, as
	// a stable sort would keep them, at an unstable sort's speed.
	slices.SortFunc(spans, func(a, b RunSpan) int {
		if c := bytes.Compare(a.Key(buf), b.Key(buf)); c != 0 {
			return c
		}
		return cmp.Compare(a.Off, b.Off)
	})
	pos := RunSamplePositions(int64(len(spans)), samples)
	offs := make([]int64, len(pos))
	keys := make([][]byte, len(pos))
	var at int64
	j := 0
	for i, sp := range spans {
		if j < len(pos) && pos[j] == int64(i) {
			offs[j], keys[j] = at, sp.Key(buf)
			j++
		}
		at += int64(sp.Len)
	}
	return EncodeRunHeader(int64(len(spans)), at, pos, offs, keys), spans, nil
}
