package testdouble

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Hook decides the outcome of one port call by its method name: nil lets
// it through.
type Hook func(method string) error

// ErrInjected is the error the tests' hooks return.
var ErrInjected = errors.New("injected fault")

// FailOnce returns a hook that fails the first call of method with
// ErrInjected and lets every other call through, so a test can fail one
// step and watch the repair.
func FailOnce(method string) Hook { return FailOnceWith(method, ErrInjected) }

// FailOnceWith is FailOnce with a given error, such as
// dynamo.ErrContention (a transaction that nothing of was applied).
func FailOnceWith(method string, err error) Hook {
	var done atomic.Bool
	return func(m string) error {
		if m == method && done.CompareAndSwap(false, true) {
			return fmt.Errorf("%s: %w", m, err)
		}
		return nil
	}
}

// Journal records writes of interest across the doubles in the order
// they applied, so a test can check one came before another (a manifest
// before the stage's completion). The zero Journal is ready to use; a
// nil one records nothing.
type Journal struct {
	mu      sync.Mutex
	entries []string
}

// Add records one entry.
func (j *Journal) Add(format string, args ...any) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, fmt.Sprintf(format, args...))
}

// All is every entry, in order.
func (j *Journal) All() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.entries)
}

// Index is the position of entry's first occurrence, or -1.
func (j *Journal) Index(entry string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Index(j.entries, entry)
}

// Count is how often entry occurs.
func (j *Journal) Count(entry string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, e := range j.entries {
		if e == entry {
			n++
		}
	}
	return n
}

// Clock is a service's clock under a test's control: tests move it past
// leases, backoffs and due times instead of waiting.
type Clock struct{ ns atomic.Int64 }

// NewClock is a clock at a fixed instant, so runs are repeatable.
func NewClock() *Clock {
	c := &Clock{}
	c.ns.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *Clock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
