package output

import (
	"context"
	"fmt"
	"io"

	"github.com/batchwork/batchwork/shared/domain"
)

// Encoder re-encodes an Output of one partition as the task writes it
// (internal/executor/parquetout for a stage whose output format is
// parquet): the bytes go to it, not to the buffers, so nothing streams
// and the cap on buffered bytes does not apply (the encoder bounds its own
// memory); Publish has it put the object, and Abort has it release what
// it holds.
type Encoder interface {
	// Write takes the task's bytes; an error fails the attempt.
	io.Writer
	// Flush takes the last line, written without its newline, as a
	// record: called once the task has returned, so that a record that
	// does not fit fails or is rejected before the attempt's bad records
	// are counted, not at publish.
	Flush() error
	// Publish finishes the object and puts it at key with If-None-Match: *.
	Publish(ctx context.Context, key string) error
	// Close releases the encoder's resources, published or not.
	Close() error
}

// Encode routes the outputs through e. Call it before the task writes.
func (o *Output) Encode(e Encoder) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.enc = e
}

// Flush has the encoder take what the task wrote last without a newline,
// once the task has returned; its error is the outputs' refusal
// (Refused), and the attempt must not commit. Without an encoder it does
// nothing: the buffers publish a last line as written.
func (o *Output) Flush() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.enc == nil || o.err != nil {
		return o.err
	}
	if err := o.enc.Flush(); err != nil {
		o.err = err
	}
	return o.err
}

// encode hands b to the encoder, counting its lines as written. o.mu is
// held.
func (o *Output) encode(r int, b []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	if r != 0 {
		o.err = fmt.Errorf("output partition %d: an encoded output has one partition", r)
		return 0, o.err
	}
	n, err := o.enc.Write(b)
	o.count(o.parts[0], b[:n])
	if err != nil {
		o.err = err
	}
	return n, err
}

// count notes b as written to p, for Records and Unwritten.
func (o *Output) count(p *outPart, b []byte) {
	if len(b) == 0 {
		return
	}
	for _, c := range b {
		if c == '\n' {
			p.lines++
		}
	}
	p.last = b[len(b)-1]
	p.size += int64(len(b))
}

// errEncodedCheckpoint refuses checkpoints of an encoded output: its
// segments would be the encoder's half-written file.
var errEncodedCheckpoint = fmt.Errorf("%w: a stage whose output format is parquet writes one file per attempt and cannot checkpoint its outputs", domain.ErrCheckpoint)
