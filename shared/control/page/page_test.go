package page

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/shared/spec"
)

func TestCursorBoundToQuery(t *testing.T) {
	t.Parallel()
	q := Query("tasks", "alice", "j1", "map", "")
	c := Encode(q, "0", "41")
	pos, err := Ints(q, c, 2)
	if err != nil || !cmp.Equal(pos, []int{0, 41}) {
		t.Fatalf("round trip: %v %v", pos, err)
	}
	cases := map[string]struct {
		query, cursor string
		n             int
	}{
		"another owner":     {Query("tasks", "bob", "j1", "map", ""), c, 2},
		"another job":       {Query("tasks", "alice", "j2", "map", ""), c, 2},
		"another filter":    {Query("tasks", "alice", "j1", "map", "READY"), c, 2},
		"another route":     {Query("history", "alice", "j1"), c, 2},
		"not base64":        {q, "!!", 2},
		"not json":          {q, "bm90IGpzb24", 2},
		"wrong arity":       {q, c, 3},
		"not a number":      {q, Encode(q, "0", "x"), 2},
		"negative position": {q, Encode(q, "0", "-7"), 2},
		"oversized":         {q, string(make([]byte, 600)), 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Ints(tc.query, tc.cursor, tc.n)
			var fe *spec.FieldError
			if !errors.As(err, &fe) || fe.Field != "cursor" {
				t.Fatalf("got %v, want a field error naming cursor", err)
			}
		})
	}
}

func TestCheckLimit(t *testing.T) {
	t.Parallel()
	for in, want := range map[int]int{0: DefaultSize, 1: 1, MaxSize: MaxSize, -1: -1, MaxSize + 1: -1} {
		got, err := CheckLimit(in)
		if (want < 0) != (err != nil) || (err == nil && got != want) {
			t.Errorf("CheckLimit(%d) = %d, %v; want %d", in, got, err, want)
		}
	}
}
