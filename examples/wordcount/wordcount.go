// Package wordcount is the word-count example: a map stage over an S3 text
// prefix that shuffles (word, count) pairs into R partitions, and a reduce
// stage that sums them. A word is a maximal run of Unicode letters,
// lowercased.
package wordcount

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// Task names, as a spec refers to them.
const (
	MapTask    = "wordcount.map"
	ReduceTask = "wordcount.reduce"
	// MapEachTask emits one record per occurrence (no combiner), so a
	// frequent word makes its shuffle partition large: the skewed word
	// count (skew.go).
	MapEachTask = "wordcount.map-each"
)

// Register adds the word-count task functions to reg.
func Register(reg *batchwork.Registry) {
	reg.Register(MapTask, Map)
	reg.Register(ReduceTask, Reduce)
	reg.Register(MapEachTask, MapEach)
}

// Spec is a word-count job over the objects under prefix (s3://bucket/p/).
func Spec(name, prefix string, splitSize int64, reducers int) []byte {
	return fmt.Appendf(nil, `{
  "name": %q,
  "stages": [
    {"name": "map", "task": %q,
     "partitions": {"input": {"prefix": %q, "splitSize": %d}},
     "shuffle": {"partitions": %d}},
    {"name": "reduce", "task": %q, "after": ["map"]}
  ],
  "retry": {"maxAttempts": 3, "backoff": "1s"}
}`, name, MapTask, prefix, splitSize, reducers, ReduceTask)
}

// Map counts the words of its split and emits one record per distinct word
// (a combiner: far fewer shuffle bytes than one record per occurrence).
func Map(ctx context.Context, t *batchwork.Task) error {
	if t.Input == nil {
		return batchwork.ErrNoInput
	}
	counts := map[string]int{}
	sc := bufio.NewScanner(t.Input)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		for _, w := range Words(sc.Text()) {
			counts[w]++
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read split: %w", err)
	}
	for w, n := range counts {
		if err := t.Out.Emit(w, strconv.Itoa(n)); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Reduce sums the counts of its shuffle partition and writes "word\tcount"
// lines sorted by word.
func Reduce(ctx context.Context, t *batchwork.Task) error {
	counts := map[string]int{}
	err := batchwork.Records(t.Input, func(k, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("count of %q: %w", k, err)
		}
		counts[k] += n
		return nil
	})
	if err != nil {
		return err
	}
	words := make([]string, 0, len(counts))
	for w := range counts {
		words = append(words, w)
	}
	slices.Sort(words)
	for _, w := range words {
		fmt.Fprintf(t.Out, "%s\t%d\n", w, counts[w])
	}
	return ctx.Err()
}

// Words splits s into maximal runs of Unicode letters, lowercased.
func Words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) })
}

// Corpus generates about size bytes of text with Zipf-distributed words
// from a fixed seed, so the example needs no download and is repeatable.
func Corpus(seed uint64, size int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	vocab := make([]string, 5000)
	letters := []rune("abcdefghijklmnopqrstuvwxyzéöñ")
	for i := range vocab {
		n := 2 + rng.IntN(8)
		w := make([]rune, n)
		for j := range w {
			w[j] = letters[rng.IntN(len(letters))]
		}
		if rng.IntN(10) == 0 {
			w[0] = unicode.ToUpper(w[0])
		}
		vocab[i] = string(w)
	}
	zipf := rand.NewZipf(rng, 1.1, 1, uint64(len(vocab)-1))
	seps := []string{" ", " ", " ", ", ", ". ", "; ", " - ", "'"}
	var b strings.Builder
	for b.Len() < size {
		words := 5 + rng.IntN(12)
		for i := 0; i < words; i++ {
			if i > 0 {
				b.WriteString(seps[rng.IntN(len(seps))])
			}
			b.WriteString(vocab[zipf.Uint64()])
		}
		b.WriteString(".\n")
	}
	return []byte(b.String())
}
