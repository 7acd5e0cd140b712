package split

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// The reader really waits at a proposed cut: read concurrently, it stops
// at the proposal until Resolve, then ends at the cut (made) or reads on
// to its old end (not made). A cut on a record boundary gives that
// record to the pieces; one inside a record leaves it to the giver.
func TestCutReaderWaitsAtProposal(t *testing.T) {
	t.Parallel()
	line := "0123456789abcdef\n" // 17 bytes
	data := strings.Repeat(line, 100)
	st := newStore(map[string]string{"k": data})
	s := Split{Key: "k", Start: 0, End: int64(len(data))}
	for _, tc := range []struct {
		name string
		at   int64
		made bool
	}{
		{"boundary, made", 50 * 17, true},
		{"inside a record, made", 50*17 + 5, true},
		{"boundary, not made", 50 * 17, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCut()
			rc, _, err := OpenFormat(context.Background(), st.open, s, Options{Cut: c})
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			br := bufio.NewReaderSize(rc, 16)
			first, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if !c.Propose(tc.at) {
				t.Fatalf("proposal at %d refused", tc.at)
			}
			got := make(chan string)
			go func() {
				rest, _ := io.ReadAll(br)
				got <- first + string(rest)
			}()
			// The reader is held at the first record start at or past at.
			hold := (tc.at + 16) / 17 * 17
			for deadline := time.Now().Add(5 * time.Second); ; {
				if _, pos, _, _ := c.Progress(); pos == hold {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("reader never reached %d", hold)
				}
				time.Sleep(time.Millisecond) // polling the reader's position
			}
			// There (limit set its position with the proposal pending) it
			// waits for Resolve: it has not finished.
			select {
			case g := <-got:
				t.Fatalf("reader finished (%d bytes) before the proposal was resolved", len(g))
			default:
			}
			c.Resolve(tc.made)
			want := data
			if tc.made {
				want = data[:hold]
				piece, _, err := readFormat(t, st.open, Split{Key: "k", Start: tc.at, End: s.End}, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if want+piece != data {
					t.Fatalf("giver's %d bytes and the piece's %d do not make the object", len(want), len(piece))
				}
			}
			if g := <-got; g != want {
				t.Fatalf("read %d bytes, want %d", len(g), len(want))
			}
		})
	}
}
