package rangeshuffle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
)

// memBlob serves objects with ranged GETs, counting them.
type memBlob struct {
	mu   sync.Mutex
	objs map[string][]byte
	gets int
}

func (m *memBlob) OpenRange(ctx context.Context, key string, start, end int64) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gets++
	b, ok := m.objs[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, domain.ErrNotFound)
	}
	start, end = min(start, int64(len(b))), min(end, int64(len(b)))
	return io.NopCloser(bytes.NewReader(b[start:end])), nil
}

// putRun writes records as a map task would: sorted, as one run.
func (m *memBlob) putRun(t *testing.T, key string, records []string) {
	t.Helper()
	buf := []byte(strings.Join(records, "\n") + "\n")
	head, spans, err := blob.SortRun(buf, blob.DefaultRunSamples)
	if err != nil {
		t.Fatal(err)
	}
	body, size := blob.RunBody(head, buf, spans)
	raw := make([]byte, size)
	if _, err := body.ReadAt(raw, 0); err != nil {
		t.Fatal(err)
	}
	m.objs[key] = raw
}

func readAll(t *testing.T, b Blob, keys []string, parts, r int, o Options) string {
	t.Helper()
	rc, err := Open(context.Background(), b, keys, parts, r, o)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("partition %d: %v", r, err)
	}
	return string(raw)
}

// The partitions in order are every record of every run, sorted by key
// (equal keys in run order, then in the order written), each key in one
// partition; any reducer and attempt, any read-ahead, chunk size or
// cache, reads the same bytes.
func TestOpenMergesTheRunsInOrder(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	m := &memBlob{objs: map[string][]byte{}}
	var keys []string
	type rec struct {
		line    string
		run, at int
		key     string
	}
	var all []rec
	for run := range 6 {
		n := 200 + r.IntN(4000)
		if run == 3 {
			n = 1 // a run of one record
		}
		var lines []string
		for i := range n {
			k := fmt.Sprintf("%05d", r.IntN(3000)) // duplicates across and within runs
			if r.IntN(10) == 0 {
				k = "hot" // a hot key
			}
			line := fmt.Sprintf("%s\trun %d record %d %s", k, run, i, strings.Repeat("v", r.IntN(40)))
			lines = append(lines, line)
			all = append(all, rec{line: line, run: run, at: i, key: k})
		}
		key := fmt.Sprintf("runs/%d", run)
		m.putRun(t, key, lines)
		keys = append(keys, key)
	}
	slices.SortStableFunc(all, func(a, b rec) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		if a.run != b.run {
			return a.run - b.run
		}
		return a.at - b.at
	})
	var want strings.Builder
	for _, a := range all {
		want.WriteString(a.line + "\n")
	}

	cache := &HeaderCache{}
	options := []Options{
		{},
		{ReadAhead: 40, MergeBudget: 1, Parallel: 1}, // headers past the read-ahead, 64 KiB chunks
		{Headers: cache},
		{Headers: cache, ReadAhead: 1 << 20}, // second use: the cache's headers
	}
	for _, parts := range []int{1, 3, 16} {
		for oi, o := range options {
			var got strings.Builder
			seen := map[string]int{}
			for p := range parts {
				s := readAll(t, m, keys, parts, p, o)
				got.WriteString(s)
				for _, line := range strings.SplitAfter(s, "\n") {
					if line == "" {
						continue
					}
					k := string(blob.RunKey([]byte(line)))
					if q, ok := seen[k]; ok && q != p {
						t.Fatalf("%d partitions, options %d: key %q in partitions %d and %d", parts, oi, k, q, p)
					}
					seen[k] = p
				}
			}
			if got.String() != want.String() {
				g, w := strings.Split(got.String(), "\n"), strings.Split(want.String(), "\n")
				for i := range min(len(g), len(w)) {
					if g[i] != w[i] {
						t.Fatalf("%d partitions, options %d: line %d is %q, want %q (%d lines, want %d)", parts, oi, i, g[i], w[i], len(g), len(w))
					}
				}
				t.Fatalf("%d partitions, options %d: %d lines, want %d", parts, oi, len(g), len(w))
			}
		}
	}
}

// The header cache saves the header GETs of the next reducer on the host.
func TestOpenHeaderCacheSavesGets(t *testing.T) {
	t.Parallel()
	m := &memBlob{objs: map[string][]byte{}}
	var keys []string
	for run := range 4 {
		var lines []string
		for i := range 20000 { // ~300 KB: past the read-ahead
			lines = append(lines, fmt.Sprintf("%06d\t%d", (i*7919+run)%20000, run))
		}
		key := fmt.Sprintf("r%d", run)
		m.putRun(t, key, lines)
		keys = append(keys, key)
	}
	cache := &HeaderCache{}
	readAll(t, m, keys, 4, 0, Options{Headers: cache})
	first := m.gets
	readAll(t, m, keys, 4, 1, Options{Headers: cache})
	second := m.gets - first
	// Without the cache a reducer GETs each header and then its slice of
	// each run, past the read-ahead; with it, only the slices.
	if first != 8 || second != 4 {
		t.Errorf("GETs: %d for the first reducer, %d for the second; want 8 (4 headers, 4 slices) and 4 (slices)", first, second)
	}
}

func TestOpenFails(t *testing.T) {
	t.Parallel()
	m := &memBlob{objs: map[string][]byte{"bad": []byte("not a run\n"), "short": nil}}
	m.putRun(t, "good", []string{"a\t1", "b\t2"})
	m.objs["short"] = m.objs["good"][:len(m.objs["good"])-2] // the records cut short
	tests := []struct {
		name string
		keys []string
		want error
	}{
		{"missing", []string{"good", "gone"}, domain.ErrNotFound},
		{"not a run", []string{"bad"}, blob.ErrBadRun},
	}
	for _, tt := range tests {
		if _, err := Open(context.Background(), m, tt.keys, 2, 0, Options{}); !errors.Is(err, tt.want) {
			t.Errorf("%s: Open = %v, want %v", tt.name, err, tt.want)
		}
	}
	// A run whose records end early fails its reader, not with a short
	// partition.
	rc, err := Open(context.Background(), m, []string{"short"}, 1, 0, Options{ReadAhead: 1})
	if err == nil {
		_, err = io.ReadAll(rc)
	}
	if !errors.Is(err, blob.ErrBadRun) {
		t.Errorf("a run cut short: %v, want ErrBadRun", err)
	}
	if _, err := Open(context.Background(), m, nil, 2, 2, Options{}); err == nil {
		t.Error("partition 2 of 2 opened")
	}
}
