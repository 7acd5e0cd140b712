package control

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/batchwork/batchwork/shared/control/kernel"
)

// A failure's message is kept within MaxErrorLen by its end, where an
// exec program's exception line is, and by its first line when that is
// short (an exec failure's exit code); a cut never splits a UTF-8
// sequence.
func TestTruncateKeepsTheTail(t *testing.T) {
	t.Parallel()
	frames := strings.Repeat("  File \"/opt/programs/job.py\", line 12, in parse\n    row = decode(line)\n", 10)
	traceback := "exec job.py: exit code 1; last stderr lines:\nTraceback (most recent call last):\n" + frames +
		"ValueError: invalid literal for int() with base 10: 'ünïcödé'"
	long := strings.Repeat("x", 4*MaxErrorLen)
	for _, tc := range []struct {
		name, in   string
		n          int
		want       string // exact, when set
		head, tail string // what the result starts and ends with
	}{
		{name: "short is kept whole", in: "boom", n: MaxErrorLen, want: "boom"},
		{name: "exactly n is kept whole", in: strings.Repeat("y", MaxErrorLen), n: MaxErrorLen, want: strings.Repeat("y", MaxErrorLen)},
		{name: "one line keeps its end", in: long + "the cause", n: MaxErrorLen,
			want: "…" + (long + "the cause")[4*MaxErrorLen+len("the cause")-(MaxErrorLen-len("…")):]},
		{name: "a traceback keeps its exit code and its exception", in: traceback, n: MaxErrorLen,
			head: "exec job.py: exit code 1; last stderr lines:\n…", tail: "ValueError: invalid literal for int() with base 10: 'ünïcödé'"},
		{name: "a long first line is not kept", in: strings.Repeat("h", MaxErrorLen) + "\nlast", n: MaxErrorLen,
			head: "…h", tail: "h\nlast"},
		{name: "the cut never splits a rune", in: strings.Repeat("é", MaxErrorLen), n: MaxErrorLen,
			head: "…é", tail: "é"},
		{name: "four-byte runes", in: strings.Repeat("😀", 100), n: 17, want: "…😀😀😀"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := kernel.Truncate(tc.in, tc.n)
			if !utf8.ValidString(got) {
				t.Fatalf("truncate gave invalid UTF-8: %q", got)
			}
			if len(got) > tc.n {
				t.Fatalf("truncate gave %d bytes, want at most %d: %q", len(got), tc.n, got)
			}
			if tc.want != "" && got != tc.want {
				t.Fatalf("truncate:\n got %q\nwant %q", got, tc.want)
			}
			if !strings.HasPrefix(got, tc.head) || !strings.HasSuffix(got, tc.tail) {
				t.Fatalf("truncate gave %q, want it to start %q and end %q", got, tc.head, tc.tail)
			}
		})
	}
}
