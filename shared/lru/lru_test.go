package lru

import (
	"fmt"
	"sync"
	"testing"
)

func TestCache(t *testing.T) {
	type op struct {
		put  bool
		k    string
		v    int
		want int // for a get: the value, or -1 for a miss
	}
	for _, tc := range []struct {
		name    string
		cap     int
		ops     []op
		wantLen int
	}{
		{"miss on empty", 2, []op{{k: "a", want: -1}}, 0},
		{"hit", 2, []op{{put: true, k: "a", v: 1}, {k: "a", want: 1}}, 1},
		{"overwrite", 2, []op{{put: true, k: "a", v: 1}, {put: true, k: "a", v: 2}, {k: "a", want: 2}}, 1},
		{"evicts the oldest", 2, []op{
			{put: true, k: "a", v: 1}, {put: true, k: "b", v: 2}, {put: true, k: "c", v: 3},
			{k: "a", want: -1}, {k: "b", want: 2}, {k: "c", want: 3},
		}, 2},
		{"a get makes an entry recent", 2, []op{
			{put: true, k: "a", v: 1}, {put: true, k: "b", v: 2}, {k: "a", want: 1}, {put: true, k: "c", v: 3},
			{k: "b", want: -1}, {k: "a", want: 1},
		}, 2},
		{"capacity below 1 holds one", 0, []op{{put: true, k: "a", v: 1}, {put: true, k: "b", v: 2}, {k: "a", want: -1}, {k: "b", want: 2}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New[string, int](tc.cap)
			for i, o := range tc.ops {
				if o.put {
					c.Put(o.k, o.v)
					continue
				}
				v, ok := c.Get(o.k)
				if got := map[bool]int{true: v, false: -1}[ok]; got != o.want {
					t.Fatalf("op %d: Get(%q) = %d (ok %v), want %d", i, o.k, v, ok, o.want)
				}
			}
			if c.Len() != tc.wantLen {
				t.Fatalf("Len = %d, want %d", c.Len(), tc.wantLen)
			}
		})
	}
}

// Concurrent use keeps the bound (run with -race to check the locking).
func TestCacheConcurrent(t *testing.T) {
	c := New[string, int](100)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				k := fmt.Sprint(g, "/", i)
				c.Put(k, i)
				if v, ok := c.Get(k); ok && v != i {
					t.Errorf("Get(%q) = %d, want %d", k, v, i)
				}
			}
		}()
	}
	wg.Wait()
	if c.Len() != 100 {
		t.Fatalf("Len = %d after 8,000 puts, want the capacity 100", c.Len())
	}
}
