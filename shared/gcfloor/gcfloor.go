// Package gcfloor gives a process's garbage collector a floor: the heap
// goal is never below about twice Size, however small the live heap.
//
// The control plane and the executors keep a live heap of 2 to 3 MB, so
// at the runtime's default (the next collection when the heap has doubled,
// 4 MB at least) they collect every 3 MB allocated: every 20 no-op tasks,
// each making about 50 KB of AWS SDK garbage per request. Collection was a
// quarter of the bench process's CPU. A never-touched block of Size bytes
// with no pointers in it counts as live heap, so the goal starts at about
// 2 x Size and collections are ten times rarer; it costs the collector
// nothing to mark and the process no resident memory, since its pages are
// never written. The heap may grow by up to 2 x Size more than without it
// before a collection; the executor's soft memory limit
// (tuning.SoftMemoryLimit, set by internal/host) still bounds the whole.
package gcfloor

import (
	"os"
	"sync"
)

// Size is the floor's block: 16 MB, so collections start near 38 MB of
// heap instead of 6.
const Size = 16 << 20

var (
	once  sync.Once
	block []byte
)

// Set puts the floor in place, once per process, unless GOGC or GOMEMLIMIT
// is set: whoever set them chose the collector's pace.
func Set() {
	once.Do(func() { block = make([]byte, size(os.Getenv)) })
}

// size is the floor for the environment: none when GOGC or GOMEMLIMIT is
// set.
func size(getenv func(string) string) int {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return 0
	}
	return Size
}

// Held is the floor's size in place, 0 if none.
func Held() int { return len(block) }
