package host

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/control"
)

// The executor sets the Go runtime's soft memory limit from the function's
// memory, so the collector holds the heap near its live bytes (the split
// and output caps are sized for live bytes: tuning.TestOneTaskAtTheCapsFits).
// An operator's GOMEMLIMIT wins, and outside Lambda nothing is set.
func TestSoftMemoryLimit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		env    map[string]string
		want   int64
		wantOK bool
	}{
		{"the stack's 1 GB", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024"}, 966367641, true},
		{"an operator's 2 GB", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "2048"}, 1932735283, true},
		{"GOMEMLIMIT set", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024", "GOMEMLIMIT": "500MiB"}, 0, false},
		{"not on Lambda", nil, 0, false},
		{"garbled", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "lots"}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := SoftMemoryLimit(func(k string) string { return tc.env[k] })
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("SoftMemoryLimit = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// BATCHWORK_SLOTS sets the long-polling host's concurrency; anything but a
// positive whole number is refused, naming the variable.
func TestSlots(t *testing.T) {
	t.Parallel()
	cases := []struct {
		value   string
		want    int
		wantErr string
	}{
		{"", 4, ""},
		{"1", 1, ""},
		{"16", 16, ""},
		{"0", 0, `BATCHWORK_SLOTS="0": want a positive whole number`},
		{"-2", 0, `BATCHWORK_SLOTS="-2": want a positive whole number`},
		{"four", 0, `BATCHWORK_SLOTS="four": want a positive whole number`},
	}
	for _, tc := range cases {
		got, err := Slots(func(k string) string {
			if k == EnvSlots {
				return tc.value
			}
			return ""
		})
		if got != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("Slots with %q = %d, %v; want %d, %q", tc.value, got, err, tc.want, tc.wantErr)
		}
	}
}

// fakeCatalog fails its first fails calls with err.
type fakeCatalog struct {
	fails int
	err   error
	calls int
	got   []string
}

func (f *fakeCatalog) PublishTaskNames(_ context.Context, names []string) error {
	f.calls++
	if f.calls <= f.fails {
		return f.err
	}
	f.got = names
	return nil
}

// A host publishes its names until the catalog takes them, since a submit
// naming them is refused until then; a control plane without a catalog
// is not retried, and a host that stops stops trying.
func TestPublishRetriesUntilPublished(t *testing.T) {
	t.Parallel()
	transient := errors.New("throttled")
	cases := []struct {
		name      string
		cat       *fakeCatalog
		ctxDone   bool
		wantCalls int
		wantErr   error
		wantNames bool
	}{
		{"at once", &fakeCatalog{}, false, 1, nil, true},
		{"after failures", &fakeCatalog{fails: 3, err: transient}, false, 4, nil, true},
		{"no catalog", &fakeCatalog{fails: 100, err: control.ErrNoTaskCatalog}, false, 1, nil, false},
		{"stopped", &fakeCatalog{fails: 100, err: transient}, true, 1, transient, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			if tc.ctxDone {
				cancel()
			}
			defer cancel()
			err := publish(ctx, tc.cat, slog.New(slog.DiscardHandler), []string{"a", "b"}, time.Millisecond)
			if !errors.Is(err, tc.wantErr) || tc.cat.calls != tc.wantCalls || (tc.cat.got != nil) != tc.wantNames {
				t.Fatalf("publish: err %v after %d calls, published %v; want err %v after %d calls, published: %v",
					err, tc.cat.calls, tc.cat.got, tc.wantErr, tc.wantCalls, tc.wantNames)
			}
		})
	}
}
