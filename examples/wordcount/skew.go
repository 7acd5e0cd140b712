package wordcount

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// SkewSpec is a word count whose map emits every occurrence (MapEach), so
// a frequent word's partition is as large as its occurrences; with skew,
// the reduce stage splits such a partition (its sum is combinable: Reduce
// reads and writes "word<TAB>count" records) when it holds over 4 times
// the median partition and over minBytes.
func SkewSpec(name, prefix string, splitSize int64, reducers int, skew bool, minBytes int64) []byte {
	sk := ""
	if skew {
		sk = fmt.Sprintf(`, "skew": {"combinable": true, "minBytes": %d}`, minBytes)
	}
	return fmt.Appendf(nil, `{
  "name": %q,
  "stages": [
    {"name": "map", "task": %q,
     "partitions": {"input": {"prefix": %q, "splitSize": %d}},
     "shuffle": {"partitions": %d}},
    {"name": "reduce", "task": %q, "after": ["map"]%s}
  ],
  "retry": {"maxAttempts": 3, "backoff": "1s"}
}`, name, MapEachTask, prefix, splitSize, reducers, ReduceTask, sk)
}

// MapEach emits ("word", "1") for every word of its split.
func MapEach(ctx context.Context, t *batchwork.Task) error {
	if t.Input == nil {
		return batchwork.ErrNoInput
	}
	sc := bufio.NewScanner(t.Input)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		for _, w := range Words(sc.Text()) {
			if err := t.Out.Emit(w, "1"); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read split: %w", err)
	}
	return ctx.Err()
}

// HotCorpus is Corpus with one word, hot, making about half of its words.
func HotCorpus(seed uint64, size int, hot string) []byte {
	var b strings.Builder
	for line := range strings.SplitSeq(string(Corpus(seed, size/2)), "\n") {
		if line == "" {
			continue
		}
		words := strings.Fields(line)
		b.WriteString(line)
		b.WriteString(strings.Repeat(" "+hot, len(words)))
		b.WriteString("\n")
	}
	return []byte(b.String())
}
