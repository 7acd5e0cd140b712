package batchwork

import (
	"errors"
	"strings"
	"testing"
)

// TaggedRecords splits a joined input's lines into source, key and value,
// and a task without an input gets ErrNoInput, as from Records.
func TestTaggedRecords(t *testing.T) {
	t.Parallel()
	var got []string
	err := TaggedRecords(strings.NewReader("orders\tc1\to1\ncustomers\tc1\tAda\n"), func(s, k, v string) error {
		got = append(got, s+"|"+k+"|"+v)
		return nil
	})
	if err != nil || strings.Join(got, " ") != "orders|c1|o1 customers|c1|Ada" {
		t.Fatalf("TaggedRecords: %q, %v", got, err)
	}
	if err := TaggedRecords(nil, func(string, string, string) error { return nil }); !errors.Is(err, ErrNoInput) {
		t.Fatalf("nil input: %v, want ErrNoInput", err)
	}
}
