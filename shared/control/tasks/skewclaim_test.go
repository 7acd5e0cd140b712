package tasks

import (
	"fmt"
	"testing"

	"github.com/batchwork/batchwork/shared/domain"
)

// A combinable skewed stage's own partitions get no speculative copy (a
// copy's claim would not list a combine task's pieces); its pieces, a
// join's tasks and other stages' do.
func TestCopyable(t *testing.T) {
	t.Parallel()
	const base = `{"name":"j","stages":[{"name":"m","task":"m","partitions":{"count":2},"shuffle":{"partitions":4}},` +
		`{"name":"r","task":"r","after":["m"]%s}]}`
	for _, tc := range []struct {
		name, skew string
		part       int
		want       bool
	}{
		{"no skew", "", 1, true},
		{"combinable, a partition", `,"skew":{"combinable":true}`, 1, false},
		{"combinable, a piece", `,"skew":{"combinable":true}`, 4, true},
	} {
		sp := parseSpec(t, fmtSpec(base, tc.skew))
		if got := copyable(sp, domain.TaskRef{Job: "j", Stage: 1, Partition: tc.part}); got != tc.want {
			t.Errorf("%s: copyable = %v, want %v", tc.name, got, tc.want)
		}
	}
	sp := parseSpec(t, fmtSpec(base, ""))
	if !copyable(sp, domain.TaskRef{Job: "j", Stage: 0, Partition: 1}) {
		t.Error("a map task is not copyable")
	}
}

func fmtSpec(format, arg string) string { return fmt.Sprintf(format, arg) }
