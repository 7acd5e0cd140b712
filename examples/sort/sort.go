// Package sort is the sort benchmark example (Jim Gray's sort benchmark,
// TeraSort): 100-byte records with 10-byte keys, sorted by a range
// shuffle (shuffle: {partitions: N, by: range}) and validated as valsort
// does: every record in key order across the outputs in partition order,
// as many records as were generated, and the same checksum (the sum of
// the records' CRC32s).
//
// A record is gensort's ASCII form recast as a Batchwork record: a key of
// 10 printable characters ('!' to '~'), a tab, the record's number as 32
// hex digits, 56 filler characters, a newline: 100 bytes. Records are a
// function of their number alone (Record), so a generator task writes any
// range of them and a validator knows the whole set's count and checksum
// without reading it (Summarize).
//
// Two jobs: GenSpec generates the records in a stage that writes straight
// into the range shuffle, and its reducers write them sorted; Spec sorts
// records already in S3 (a map stage that passes its input's records on).
// Either way the reduce stage (ReduceTask) writes its records in the order
// it reads them, which keeps the total order.
package sort

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// Task names, as a spec refers to them.
const (
	GenTask    = "sort.gen"
	MapTask    = "sort.map"
	ReduceTask = "sort.reduce"
)

// Register adds the example's task functions to reg.
func Register(reg *batchwork.Registry) {
	reg.Register(GenTask, Gen)
	reg.Register(MapTask, Map)
	reg.Register(ReduceTask, Reduce)
}

// Record sizes.
const (
	RecordLen = 100
	KeyLen    = 10
)

// Record appends record i to b.
func Record(b []byte, i uint64) []byte {
	x := i
	for range KeyLen {
		x = splitmix(x)
		b = append(b, byte('!'+x%94))
	}
	b = append(b, '\t')
	b = fmt.Appendf(b, "%032X", i)
	f := byte('A' + i%26)
	for j := range 56 {
		b = append(b, f+byte(j/4%2)) // gensort's filler: letters in runs of 4
	}
	return append(b, '\n')
}

// splitmix is SplitMix64's step: a record's key bits from its number.
func splitmix(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// Generate is records [first, first+n), in number order.
func Generate(first, n uint64) []byte {
	b := make([]byte, 0, n*RecordLen)
	for i := first; i < first+n; i++ {
		b = Record(b, i)
	}
	return b
}

// Summary is what valsort reports of a set of records.
type Summary struct {
	Records  uint64
	Checksum uint64 // the sum of the records' CRC32s (IEEE), mod 2^64
}

// Summarize is the summary of records [first, first+n), computed without
// storing them.
func Summarize(first, n uint64) Summary {
	var s Summary
	b := make([]byte, 0, RecordLen)
	for i := first; i < first+n; i++ {
		b = Record(b[:0], i)
		s.Records++
		s.Checksum += uint64(crc32.ChecksumIEEE(b))
	}
	return s
}

// GenSpec is a job of gens generator tasks of perGen records each,
// shuffled by range into reducers sorted outputs.
func GenSpec(name string, gens, perGen, reducers int) []byte {
	params := ""
	for g := range gens {
		if g > 0 {
			params += ","
		}
		params += fmt.Sprintf(`{"first":"%d","records":"%d"}`, g*perGen, perGen)
	}
	return fmt.Appendf(nil, `{
  "name": %q,
  "stages": [
    {"name": "gen", "task": %q, "partitions": {"count": %d, "params": [%s]},
     "shuffle": {"partitions": %d, "by": "range"}},
    {"name": "sort", "task": %q, "after": ["gen"]}
  ],
  "retry": {"maxAttempts": 3, "backoff": "1s"}
}`, name, GenTask, gens, params, reducers, ReduceTask)
}

// Spec is a job sorting the records under prefix into reducers outputs,
// a map task per splitSize bytes.
func Spec(name, prefix string, splitSize int64, reducers int) []byte {
	return fmt.Appendf(nil, `{
  "name": %q,
  "stages": [
    {"name": "map", "task": %q, "partitions": {"input": {"prefix": %q, "splitSize": %d}},
     "shuffle": {"partitions": %d, "by": "range"}},
    {"name": "sort", "task": %q, "after": ["map"]}
  ],
  "retry": {"maxAttempts": 3, "backoff": "1s"}
}`, name, MapTask, prefix, splitSize, reducers, ReduceTask)
}

// Gen writes the records its partition's params name ("first",
// "records") into the range shuffle, in number order: the shuffle sorts
// them.
func Gen(ctx context.Context, t *batchwork.Task) error {
	first, err := strconv.ParseUint(t.Params["first"], 10, 64)
	if err != nil {
		return batchwork.Permanent(fmt.Errorf("param first: %w", err))
	}
	n, err := strconv.ParseUint(t.Params["records"], 10, 64)
	if err != nil {
		return batchwork.Permanent(fmt.Errorf("param records: %w", err))
	}
	const batch = 10_000
	b := make([]byte, 0, batch*RecordLen)
	for i := first; i < first+n; i += batch {
		b = b[:0]
		for j := i; j < min(i+batch, first+n); j++ {
			b = Record(b, j)
		}
		if _, err := t.Out.Write(b); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Map passes its split's records on into the range shuffle: each line is
// a record, its key before the tab.
func Map(ctx context.Context, t *batchwork.Task) error {
	if t.Input == nil {
		return batchwork.ErrNoInput
	}
	_, err := io.Copy(t.Out, t.Input)
	return err
}

// Reduce writes its partition's records in the order it reads them: in
// key order, which is what a range shuffle's reducer reads.
func Reduce(ctx context.Context, t *batchwork.Task) error {
	if t.Input == nil {
		return batchwork.ErrNoInput
	}
	_, err := io.Copy(t.Out, t.Input)
	return err
}

// ErrUnordered: the records are not in key order.
var ErrUnordered = errors.New("records out of order")

// ErrBadRecord: a record is not a record of this benchmark.
var ErrBadRecord = errors.New("not a 100-byte sort record")

// Validator checks records read in order, part after part, as valsort
// does: every record 100 bytes with a tab after its key, no key before
// the previous one; it sums what Summarize sums.
type Validator struct {
	Summary
	last [KeyLen]byte
}

// Add reads one part's records, in order, after those of the parts
// before it.
func (v *Validator) Add(r io.Reader, name string) error {
	br := bufio.NewReaderSize(r, 1<<16)
	rec := make([]byte, RecordLen)
	for {
		if _, err := io.ReadFull(br, rec); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: after record %d: %w (%v)", name, v.Records, ErrBadRecord, err)
		}
		if rec[KeyLen] != '\t' || rec[RecordLen-1] != '\n' {
			return fmt.Errorf("%s: record %d %q: %w", name, v.Records, rec, ErrBadRecord)
		}
		if v.Records > 0 && bytes.Compare(rec[:KeyLen], v.last[:]) < 0 {
			return fmt.Errorf("%s: record %d's key %q sorts before the one before it, %q: %w", name, v.Records, rec[:KeyLen], v.last[:], ErrUnordered)
		}
		copy(v.last[:], rec[:KeyLen])
		v.Records++
		v.Checksum += uint64(crc32.ChecksumIEEE(rec))
	}
}
