package split

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"testing"
)

// A split cut while it is read, at any moment and at any offset past what
// its reader consumed, and the pieces carved off it read every record of
// the original split exactly once, in order, in every format whose
// splits can be cut; a cut that is not made changes nothing.
func TestCutReadsEveryRecordOnce(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(7))
	objects := map[string]string{
		"lines": string(randomObject(rng)) + strings.Repeat("a fairly long line of text\n", 200),
		"jsonl": strings.Repeat("{\"k\": \"v\"}\n\n{\"n\": [1, 2, 3]}\n", 120),
		"csv":   "h1,h2\r\n" + strings.Repeat("1,\"quoted\nnewline, and \"\"quotes\"\"\"\r\n2,plain\r\n", 120),
	}
	formats := map[string]string{"lines": Lines, "jsonl": JSONL, "csv": CSV}
	st := newStore(objects)
	for name, data := range objects {
		size := int64(len(data))
		whole := Split{Key: name, Start: 0, End: size}
		want, _, err := readFormat(t, st.open, whole, Options{Format: formats[name], Lookahead: 64})
		if err != nil {
			t.Fatal(err)
		}
		for trial := range 60 {
			t.Run(fmt.Sprintf("%s/%d", name, trial), func(t *testing.T) {
				// Start somewhere in the object, read some records, cut.
				s := Split{Key: name, Start: rng.Int63n(size / 2), End: size}
				wantS, _, err := readFormat(t, st.open, s, Options{Format: formats[name], Lookahead: 64})
				if err != nil {
					t.Fatal(err)
				}
				c := NewCut()
				rc, _, err := OpenFormat(context.Background(), st.open, s, Options{Format: formats[name], Lookahead: 64, Cut: c})
				if err != nil {
					t.Fatal(err)
				}
				defer rc.Close()
				br := bufio.NewReader(rc)
				var got strings.Builder
				for range rng.Intn(20) {
					line, err := br.ReadString('\n')
					got.WriteString(line)
					if err != nil {
						break
					}
				}
				made := rng.Intn(4) != 0
				_, pos, end, ok := c.Progress()
				var give []Split
				at := end
				if ok {
					at, give = Carve(Split{Key: s.Key, Start: s.Start, End: end}, pos, 1+rng.Intn(4), 1+rng.Int63n(200))
				}
				if len(give) > 0 && c.Propose(at) {
					c.Resolve(made)
				} else {
					made = false
				}
				rest, err := io.ReadAll(br)
				if err != nil {
					t.Fatal(err)
				}
				got.Write(rest)
				if made {
					for _, p := range give {
						part, _, err := readFormat(t, st.open, p, Options{Format: formats[name], Lookahead: 64})
						if err != nil {
							t.Fatal(err)
						}
						got.WriteString(part)
					}
				}
				if got.String() != wantS {
					t.Fatalf("cut at %d (made %v, pieces %v): read\n%q\nwant\n%q", at, made, give, got.String(), wantS)
				}
			})
		}
		_ = want
	}
}

// A proposal is refused where it cannot hold: at or before what the
// reader consumed, at or past the end, twice, or for a compressed object.
func TestCutProposeRefused(t *testing.T) {
	t.Parallel()
	st := newStore(map[string]string{"a": strings.Repeat("line\n", 100), "b.gz": gz(t, "x\n")})
	c := NewCut()
	rc, _, err := OpenFormat(context.Background(), st.open, Split{Key: "a", Start: 0, End: 500}, Options{Cut: c})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	buf := make([]byte, 10)
	if _, err := io.ReadFull(rc, buf); err != nil {
		t.Fatal(err)
	}
	_, pos, end, ok := c.Progress()
	// The position is the start of the record being read: the second.
	if !ok || pos != 5 || end != 500 {
		t.Fatalf("progress %d of %d (ok %v), want 5 of 500", pos, end, ok)
	}
	for _, at := range []int64{0, pos, 500, 600} {
		if c.Propose(at) {
			t.Errorf("Propose(%d) accepted", at)
		}
	}
	if !c.Propose(100) || c.Propose(200) {
		t.Fatal("want the first proposal accepted and a second refused")
	}
	c.Resolve(true)
	rest, err := io.ReadAll(rc)
	if err != nil || len(rest) != 90 {
		t.Fatalf("read %d bytes after the cut (%v), want 90", len(rest), err)
	}
	if _, _, _, ok := c.Progress(); ok {
		t.Error("a finished reader can still be cut")
	}

	gc := NewCut()
	grc, _, err := OpenFormat(context.Background(), st.open, Split{Key: "b.gz", Start: 0, End: 20}, Options{Cut: gc})
	if err != nil {
		t.Fatal(err)
	}
	defer grc.Close()
	if _, _, _, ok := gc.Progress(); ok {
		t.Error("a compressed object's split can be cut")
	}
}

func TestCarve(t *testing.T) {
	t.Parallel()
	s := Split{Key: "k", Start: 0, End: 1000, ETag: "e", Source: 3}
	tests := []struct {
		name     string
		pos      int64
		pieces   int
		min      int64
		wantAt   int64
		wantGive int
	}{
		{"four pieces and the giver's share", 0, 4, 10, 200, 4},
		{"the remainder stays with the giver", 2, 2, 10, 2 + 332 + 2, 2},
		{"pieces limited by their minimum", 600, 8, 100, 700, 3},
		{"too little left", 950, 4, 100, 1000, 0},
		{"past the end", 1000, 4, 1, 1000, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, give := Carve(s, tt.pos, tt.pieces, tt.min)
			if at != tt.wantAt || len(give) != tt.wantGive {
				t.Fatalf("Carve = %d, %v; want %d and %d pieces", at, give, tt.wantAt, tt.wantGive)
			}
			next := at
			for _, p := range give {
				if p.Start != next || p.End <= p.Start || p.Key != "k" || p.ETag != "e" || p.Source != 3 {
					t.Fatalf("pieces %v do not tile [%d, 1000)", give, at)
				}
				next = p.End
			}
			if len(give) > 0 && next != 1000 {
				t.Fatalf("pieces %v end at %d, want 1000", give, next)
			}
		})
	}
}
