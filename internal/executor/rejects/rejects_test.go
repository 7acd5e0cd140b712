package rejects

import (
	"bufio"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/batchwork/batchwork/shared/domain"
)

// Offsets stay exact across an input several times the search window, as
// the window slides and compacts.
func TestRejectsLocateSlidingWindow(t *testing.T) {
	var b strings.Builder
	want := map[string]int64{}
	for i := 0; b.Len() < 4*tailWindow; i++ {
		line := fmt.Sprintf("record %d %s", i, strings.Repeat("y", i%300))
		if i%997 == 0 {
			want[line] = int64(b.Len())
		}
		b.WriteString(line + "\n")
	}
	input := b.String()
	rj, in := New("s", 0, 1, len(want), strings.NewReader(input))
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if _, ok := want[sc.Text()]; ok {
			if err := rj.Reject(-1, sc.Bytes(), "bad"); err != nil {
				t.Fatal(err)
			}
		}
	}
	recs := rj.Records()
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	for _, r := range recs {
		if r.Offset != want[r.Record] {
			t.Errorf("%q at %d, want %d", r.Record, r.Offset, want[r.Record])
		}
	}
}

// Rejections from several goroutines are all counted, and one past the
// limit fails the attempt permanently.
func TestRejectsConcurrentAndLimit(t *testing.T) {
	rj, _ := New("s", 0, 1, 100, nil)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				if err := rj.Reject(-1, []byte("r"), "x"); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if rj.Count() != 100 || rj.Err() != nil {
		t.Fatalf("count %d err %v, want 100 and none", rj.Count(), rj.Err())
	}
	err := rj.Reject(-1, []byte("r"), "x")
	if !errors.Is(err, domain.ErrTooManyBadRecords) || !errors.Is(err, domain.ErrPermanent) || !errors.Is(rj.Err(), domain.ErrTooManyBadRecords) {
		t.Fatalf("101st rejection: %v, Err %v", err, rj.Err())
	}
}
