// Package wirejson reads and writes the AWS JSON 1.0 bodies of the lean
// clients (shared/ddbwire, shared/sqswire): an appending encoder and a
// single-pass decoder, without reflection.
package wirejson

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Enc appends AWS JSON 1.0 to b. A comma goes before a key or an element
// unless it is the first of its object or array, which the last byte
// written tells.
type Enc struct{ B []byte }

func (e *Enc) Sep() {
	if n := len(e.B); n > 0 {
		switch e.B[n-1] {
		case '{', '[', ':':
		default:
			e.B = append(e.B, ',')
		}
	}
}

func (e *Enc) Key(k string) {
	e.Sep()
	e.B = append(e.B, '"')
	e.B = append(e.B, k...) // keys are the API's member names or escaped by the caller
	e.B = append(e.B, '"', ':')
}

// AnyKey writes a map key from the caller's data.
func (e *Enc) AnyKey(k string) {
	e.Sep()
	e.B = AppendString(e.B, k)
	e.B = append(e.B, ':')
}

func (e *Enc) Str(s string) {
	e.Sep()
	e.B = AppendString(e.B, s)
}

func (e *Enc) Bool(v bool) {
	e.Sep()
	e.B = strconv.AppendBool(e.B, v)
}

func (e *Enc) Int(v int64) {
	e.Sep()
	e.B = strconv.AppendInt(e.B, v, 10)
}

func (e *Enc) Open(c byte) {
	e.Sep()
	e.B = append(e.B, c)
}

func (e *Enc) Close(c byte) { e.B = append(e.B, c) }

const hexDigits = "0123456789abcdef"

// AppendString quotes s as encoding/json does (without its HTML
// escaping): control characters, quotes and backslashes escaped, invalid
// UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := plainLen(s); i < len(s); {
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

// plainLen is the length of s's first run of bytes AppendString copies
// as they are (ASCII, not a control character, quote or backslash),
// eight bytes at a time: the strings a request carries (keys, expressions,
// values) are mostly such bytes, and the byte at a time loop was about 3%
// of the bench runner's CPU.
func plainLen(s string) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	i := 0
	for ; i+8 <= len(s); i += 8 {
		t := s[i : i+8]
		w := uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
			uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
		q := w ^ ('"' * ones)
		bs := w ^ ('\\' * ones)
		// A byte's high bit set in: w (not ASCII), w-0x20 over ^w (below
		// 0x20), q-1 over ^q (a quote), bs-1 over ^bs (a backslash).
		if (w|(w-0x20*ones)&^w|(q-ones)&^q|(bs-ones)&^bs)&highs != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			break
		}
	}
	return i
}

// Dec reads one JSON document. The first error stops it: every method
// then returns zero values, and Err says what and where.
type Dec struct {
	B   []byte
	I   int
	Err error
}

var ErrSyntax = errors.New("invalid JSON")

func (d *Dec) Fail(what string) {
	if d.Err == nil {
		d.Err = fmt.Errorf("%w: %s at offset %d", ErrSyntax, what, d.I)
	}
}

func (d *Dec) Ws() {
	for d.I < len(d.B) {
		switch d.B[d.I] {
		case ' ', '\t', '\n', '\r':
			d.I++
		default:
			return
		}
	}
}

// Peek returns the next non-space byte, 0 at the end or after an error.
func (d *Dec) Peek() byte {
	if d.Err != nil {
		return 0
	}
	d.Ws()
	if d.I >= len(d.B) {
		return 0
	}
	return d.B[d.I]
}

func (d *Dec) Expect(c byte) bool {
	if d.Peek() != c {
		d.Fail("expected " + strconv.QuoteRune(rune(c)))
		return false
	}
	d.I++
	return true
}

// Null consumes a null if one is next.
func (d *Dec) Null() bool {
	if d.Peek() == 'n' && len(d.B)-d.I >= 4 && string(d.B[d.I:d.I+4]) == "null" {
		d.I += 4
		return true
	}
	return false
}

// Object calls fn for each member; fn reads the value. The key's bytes
// are valid until the next read.
func (d *Dec) Object(fn func(key []byte)) {
	if d.Null() || !d.Expect('{') {
		return
	}
	if d.Peek() == '}' {
		d.I++
		return
	}
	for d.Err == nil {
		k := d.StrBytes()
		if !d.Expect(':') {
			return
		}
		fn(k)
		switch d.Peek() {
		case ',':
			d.I++
		case '}':
			d.I++
			return
		default:
			d.Fail("expected , or }")
		}
	}
}

// Array calls fn for each element; fn reads it.
func (d *Dec) Array(fn func()) {
	if d.Null() || !d.Expect('[') {
		return
	}
	if d.Peek() == ']' {
		d.I++
		return
	}
	for d.Err == nil {
		fn()
		switch d.Peek() {
		case ',':
			d.I++
		case ']':
			d.I++
			return
		default:
			d.Fail("expected , or ]")
		}
	}
}

func (d *Dec) Str() string {
	if d.Null() {
		return ""
	}
	return string(d.StrBytes())
}

func (d *Dec) StrPtr() *string {
	if d.Null() {
		return nil
	}
	s := string(d.StrBytes())
	return &s
}

// StrBytes reads a string: a slice of the input when it has no escapes.
func (d *Dec) StrBytes() []byte {
	if !d.Expect('"') {
		return nil
	}
	start := d.I
	for d.I < len(d.B) {
		c := d.B[d.I]
		if c == '"' {
			s := d.B[start:d.I]
			d.I++
			return s
		}
		if c == '\\' {
			return d.Unescape(start)
		}
		if c < 0x20 {
			d.Fail("control character in string")
			return nil
		}
		d.I++
	}
	d.Fail("unterminated string")
	return nil
}

func (d *Dec) Unescape(start int) []byte {
	out := append([]byte(nil), d.B[start:d.I]...)
	for d.I < len(d.B) {
		c := d.B[d.I]
		switch {
		case c == '"':
			d.I++
			return out
		case c < 0x20:
			d.Fail("control character in string")
			return nil
		case c != '\\':
			out = append(out, c)
			d.I++
			continue
		}
		d.I++
		if d.I >= len(d.B) {
			break
		}
		e := d.B[d.I]
		d.I++
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := d.Hex4()
			if !ok {
				return nil
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if d.I+1 < len(d.B) && d.B[d.I] == '\\' && d.B[d.I+1] == 'u' {
					save := d.I
					d.I += 2
					if r2, ok = d.Hex4(); !ok {
						return nil
					}
					if utf16.DecodeRune(r, r2) == utf8.RuneError {
						d.I = save
						r2 = -1
					}
				}
				if r2 < 0 {
					r = utf8.RuneError
				} else {
					r = utf16.DecodeRune(r, r2)
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			d.Fail("bad escape")
			return nil
		}
	}
	d.Fail("unterminated string")
	return nil
}

func (d *Dec) Hex4() (rune, bool) {
	if len(d.B)-d.I < 4 {
		d.Fail("short \\u escape")
		return 0, false
	}
	v, err := strconv.ParseUint(string(d.B[d.I:d.I+4]), 16, 32)
	if err != nil {
		d.Fail("bad \\u escape")
		return 0, false
	}
	d.I += 4
	return rune(v), true
}

func (d *Dec) Bool() bool {
	switch d.Peek() {
	case 't':
		if len(d.B)-d.I >= 4 && string(d.B[d.I:d.I+4]) == "true" {
			d.I += 4
			return true
		}
	case 'f':
		if len(d.B)-d.I >= 5 && string(d.B[d.I:d.I+5]) == "false" {
			d.I += 5
			return false
		}
	case 'n':
		if d.Null() {
			return false
		}
	}
	d.Fail("expected a boolean")
	return false
}

// Number returns a number's literal.
func (d *Dec) Number() []byte {
	d.Peek()
	start := d.I
	for d.I < len(d.B) {
		c := d.B[d.I]
		if !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
			break
		}
		d.I++
	}
	if d.I == start {
		d.Fail("expected a number")
	}
	return d.B[start:d.I]
}

func (d *Dec) Int32() int32 {
	if d.Null() {
		return 0
	}
	v, err := strconv.ParseInt(string(d.Number()), 10, 32)
	if err != nil {
		d.Fail("bad integer")
	}
	return int32(v)
}

func (d *Dec) Float() *float64 {
	if d.Null() {
		return nil
	}
	v, err := strconv.ParseFloat(string(d.Number()), 64)
	if err != nil {
		d.Fail("bad number")
	}
	return &v
}

// Skip reads any value.
func (d *Dec) Skip() {
	switch d.Peek() {
	case '{':
		d.Object(func([]byte) { d.Skip() })
	case '[':
		d.Array(d.Skip)
	case '"':
		d.StrBytes()
	case 't', 'f':
		d.Bool()
	case 'n':
		if !d.Null() {
			d.Fail("bad literal")
		}
	default:
		d.Number()
	}
}

// End checks nothing but space follows the document.
func (d *Dec) End() {
	d.Ws()
	if d.Err == nil && d.I != len(d.B) {
		d.Fail("data after the document")
	}
}
