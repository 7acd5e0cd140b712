package wirejson

import (
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"
)

// appendStringBytewise is AppendString a byte at a time, without
// plainLen: what AppendString must write.
func appendStringBytewise(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func TestAppendStringIsBytewise(t *testing.T) {
	// Every byte that is not plain, at every offset of a 17-byte string
	// (both words and the tail), and its neighbours in value.
	var special []byte
	for c := range 256 {
		if c < 0x21 || c >= 0x7f || c == '"' || c == '\\' || c == '"'-1 || c == '"'+1 || c == '\\'-1 || c == '\\'+1 {
			special = append(special, byte(c))
		}
	}
	base := "abcdefghijklmnopq"
	cases := []string{"", "a", "TASK#stage-1#000123", "#st = :ready AND (attribute_not_exists(#tok) OR #lease < :now)", "é", "\u2028x\u2029", "a\xffb", strings.Repeat("x", 64) + "\"", strings.Repeat("~", 40)}
	for i := range len(base) {
		for _, c := range special {
			cases = append(cases, base[:i]+string([]byte{c})+base[i+1:])
		}
	}
	rng := rand.New(rand.NewSource(31))
	alphabet := []string{"a", "Z", "0", " ", "~", "\x7f", "\x1f", "\x00", "\"", "\\", "\n", "\t", "é", "\u2028", "\xff", "!", "#", "[", "]"}
	for range 5000 {
		var sb strings.Builder
		for range rng.Intn(40) {
			if rng.Intn(4) == 0 {
				sb.WriteString(alphabet[rng.Intn(len(alphabet))])
			} else {
				sb.WriteByte(byte('a' + rng.Intn(26)))
			}
		}
		cases = append(cases, sb.String())
	}
	for _, s := range cases {
		got, want := AppendString([]byte("x"), s), appendStringBytewise([]byte("x"), s)
		if string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %q, want %q", s, got, want)
		}
		if n := plainLen(s); n > len(s) || strings.IndexFunc(s[:n], func(r rune) bool { return r < 0x20 || r >= utf8.RuneSelf || r == '"' || r == '\\' }) >= 0 ||
			n < len(s) && s[n] >= 0x20 && s[n] < utf8.RuneSelf && s[n] != '"' && s[n] != '\\' {
			t.Fatalf("plainLen(%q) = %d", s, n)
		}
	}
}

func BenchmarkAppendString(b *testing.B) {
	s := "#st = :ready AND (attribute_not_exists(#tok) OR #lease < :now)"
	buf := make([]byte, 0, 256)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = AppendString(buf[:0], s)
	}
}

func BenchmarkAppendStringBytewise(b *testing.B) {
	s := "#st = :ready AND (attribute_not_exists(#tok) OR #lease < :now)"
	buf := make([]byte, 0, 256)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = appendStringBytewise(buf[:0], s)
	}
}
