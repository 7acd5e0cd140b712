package tagged

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func src(name, body string, opened *[]string) Source {
	return Source{Name: name, Open: func() (io.ReadCloser, error) {
		*opened = append(*opened, name)
		return io.NopCloser(strings.NewReader(body)), nil
	}}
}

// Each line of each source is tagged with its source's name; a source
// whose last line has no newline gets one; an empty source adds nothing.
func TestConcat(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 200<<10) // past the read buffer: goes out in pieces
	tests := []struct {
		name    string
		sources [][2]string
		want    string
	}{
		{"two sources", [][2]string{{"orders", "c1\to1\nc2\to2\n"}, {"customers", "c1\tAda\n"}},
			"orders\tc1\to1\norders\tc2\to2\ncustomers\tc1\tAda\n"},
		{"no final newline", [][2]string{{"a", "k\tv"}, {"b", "k\tw\n"}}, "a\tk\tv\nb\tk\tw\n"},
		{"empty sources", [][2]string{{"a", ""}, {"b", "k\tv\n"}, {"c", ""}}, "b\tk\tv\n"},
		{"empty lines stay records", [][2]string{{"a", "\n\n"}}, "a\t\na\t\n"},
		{"a long line is tagged once", [][2]string{{"a", "k\t" + long + "\nk2\tv\n"}}, "a\tk\t" + long + "\na\tk2\tv\n"},
		{"none", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, wrap := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader, iotest.HalfReader} {
				var opened []string
				var srcs []Source
				for _, s := range tt.sources {
					srcs = append(srcs, src(s[0], s[1], &opened))
				}
				got, err := io.ReadAll(wrap(Concat(srcs)))
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != tt.want {
					t.Errorf("got %.200q, want %.200q", got, tt.want)
				}
				if len(opened) != len(tt.sources) {
					t.Errorf("opened %v", opened)
				}
			}
		})
	}
}

// A source is opened only when the stream reaches it, and its error ends
// the stream.
func TestConcatOpensLazily(t *testing.T) {
	t.Parallel()
	var opened []string
	boom := errors.New("boom")
	r := Concat([]Source{src("a", "k\tv\n", &opened), {Name: "b", Open: func() (io.ReadCloser, error) { return nil, boom }}})
	if len(opened) != 0 {
		t.Fatalf("opened %v before any read", opened)
	}
	buf := make([]byte, 4)
	if _, err := r.Read(buf); err != nil {
		t.Fatal(err)
	}
	if len(opened) != 1 {
		t.Fatalf("opened %v after the first read, want [a]", opened)
	}
	if _, err := io.ReadAll(r); !errors.Is(err, boom) {
		t.Fatalf("ReadAll error %v, want the open's", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// Records splits each line into its source, key and value.
func TestRecords(t *testing.T) {
	t.Parallel()
	in := "orders\tc1\to1\tmore\ncustomers\tc1\nbare\n"
	var got [][3]string
	err := Records(strings.NewReader(in), func(s, k, v string) error {
		got = append(got, [3]string{s, k, v})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := [][3]string{{"orders", "c1", "o1\tmore"}, {"customers", "c1", ""}, {"bare", "", ""}}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d: got %q, want %q", i, got[i], want[i])
		}
	}
	stop := errors.New("stop")
	if err := Records(strings.NewReader(in), func(string, string, string) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("fn's error: got %v", err)
	}
}
