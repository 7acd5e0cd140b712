//go:build linux

package execstage

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/domain"
)

// An exec program runs under its memory and CPU time limits: one that
// passes its memory limit, however it does (one allocation the data limit
// refuses, shared memory the data limit does not count, several processes
// each under it), fails as out of memory, so it climbs to the next size
// like any out-of-memory end; one that uses its CPU time fails
// permanently; one within its limits succeeds. Each program either ends
// by itself or holds its memory until it is killed, so no verdict depends
// on timing: a program that passes its limit in memory the data limit
// does not count holds it until the watchdog stops it.
func TestExecProgramLimits(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed for the memory limit's programs: %v", err)
	}
	const mib = 1 << 20
	lim := Limits{Memory: 64 * mib}
	tests := []struct {
		name      string
		script    string
		lim       Limits
		wantClass domain.ErrorClass
		wantCause []string
	}{
		{name: "within the limit", lim: lim, wantClass: domain.ClassNone,
			script: `exec python3 -c "b = b'x' * (16 << 20); print(len(b))"`},
		{name: "one allocation past the limit", lim: lim, wantClass: domain.ClassOutOfMemory,
			script:    `exec python3 -c "b = b'x' * (96 << 20); print(len(b))"`,
			wantCause: []string{"exec prog: out of memory: an allocation past its 64 MiB limit failed", "MemoryError"}},
		{name: "resident memory past the limit, outside the data limit", lim: lim, wantClass: domain.ClassOutOfMemory,
			script: `exec python3 -c "
import mmap
m = mmap.mmap(-1, 96 << 20)
chunk = b'x' * (1 << 20)
for i in range(96):
    m[i << 20:(i + 1) << 20] = chunk
import signal
signal.pause()
"`,
			wantCause: []string{"exec prog: out of memory: its processes' resident memory reached", "over its 64 MiB limit"}},
		{name: "a group of processes past the limit together", lim: lim, wantClass: domain.ClassOutOfMemory,
			script: `for i in 1 2 3; do
  python3 -c "import signal; b = b'x' * (30 << 20); signal.pause()" &
done
wait`,
			wantCause: []string{"exec prog: out of memory: its processes' resident memory reached", "over its 64 MiB limit"}},
		{name: "CPU time", lim: Limits{CPUTime: time.Second}, wantClass: domain.ClassPermanent,
			script:    "while :; do :; done",
			wantCause: []string{"exec prog: used", "of CPU time, its limit is 1s (resources.cpuTime)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := testdouble.Programs(t, map[string]string{"prog": tt.script})
			prog, err := New(dir, mustSpec(t, execOne).Stages[0], tt.lim)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- prog.Run(context.Background(), &Attempt{Out: &memOut{}, Log: discard()}) }()
			err = within(t, done, time.Minute, "the program to end")
			if got := domain.ClassOf(err); got != tt.wantClass {
				t.Fatalf("class %q (error %v), want %q", got, err, tt.wantClass)
			}
			for _, w := range tt.wantCause {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
