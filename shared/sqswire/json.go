package sqswire

// The JSON codec is ddbwire's (shared/ddbwire/json.go), copied: it is
// being tuned there for the store's requests, and moves into
// shared/awswire for both clients once that settles.

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// enc appends AWS JSON 1.0 to b. A comma goes before a key or an element
// unless it is the first of its object or array, which the last byte
// written tells.
type enc struct{ b []byte }

func (e *enc) sep() {
	if n := len(e.b); n > 0 {
		switch e.b[n-1] {
		case '{', '[', ':':
		default:
			e.b = append(e.b, ',')
		}
	}
}

func (e *enc) key(k string) {
	e.sep()
	e.b = append(e.b, '"')
	e.b = append(e.b, k...) // keys are the API's member names or escaped by the caller
	e.b = append(e.b, '"', ':')
}

// anyKey writes a map key from the caller's data.
func (e *enc) anyKey(k string) {
	e.sep()
	e.b = appendString(e.b, k)
	e.b = append(e.b, ':')
}

func (e *enc) str(s string) {
	e.sep()
	e.b = appendString(e.b, s)
}

func (e *enc) boolean(v bool) {
	e.sep()
	e.b = strconv.AppendBool(e.b, v)
}

func (e *enc) int(v int64) {
	e.sep()
	e.b = strconv.AppendInt(e.b, v, 10)
}

func (e *enc) open(c byte) {
	e.sep()
	e.b = append(e.b, c)
}

func (e *enc) close(c byte) { e.b = append(e.b, c) }

const hexDigits = "0123456789abcdef"

// appendString quotes s as encoding/json does (without its HTML
// escaping): control characters, quotes and backslashes escaped, invalid
// UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
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

// dec reads one JSON document. The first error stops it: every method
// then returns zero values, and err says what and where.
type dec struct {
	b   []byte
	i   int
	err error
}

var errSyntax = errors.New("invalid JSON")

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at offset %d", errSyntax, what, d.i)
	}
}

func (d *dec) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, 0 at the end or after an error.
func (d *dec) peek() byte {
	if d.err != nil {
		return 0
	}
	d.ws()
	if d.i >= len(d.b) {
		return 0
	}
	return d.b[d.i]
}

func (d *dec) expect(c byte) bool {
	if d.peek() != c {
		d.fail("expected " + strconv.QuoteRune(rune(c)))
		return false
	}
	d.i++
	return true
}

// null consumes a null if one is next.
func (d *dec) null() bool {
	if d.peek() == 'n' && len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// object calls fn for each member; fn reads the value. The key's bytes
// are valid until the next read.
func (d *dec) object(fn func(key []byte)) {
	if d.null() || !d.expect('{') {
		return
	}
	if d.peek() == '}' {
		d.i++
		return
	}
	for d.err == nil {
		k := d.strBytes()
		if !d.expect(':') {
			return
		}
		fn(k)
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return
		default:
			d.fail("expected , or }")
		}
	}
}

// array calls fn for each element; fn reads it.
func (d *dec) array(fn func()) {
	if d.null() || !d.expect('[') {
		return
	}
	if d.peek() == ']' {
		d.i++
		return
	}
	for d.err == nil {
		fn()
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return
		default:
			d.fail("expected , or ]")
		}
	}
}

func (d *dec) str() string {
	if d.null() {
		return ""
	}
	return string(d.strBytes())
}

func (d *dec) strPtr() *string {
	if d.null() {
		return nil
	}
	s := string(d.strBytes())
	return &s
}

// strBytes reads a string: a slice of the input when it has no escapes.
func (d *dec) strBytes() []byte {
	if !d.expect('"') {
		return nil
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		if c == '"' {
			s := d.b[start:d.i]
			d.i++
			return s
		}
		if c == '\\' {
			return d.unescape(start)
		}
		if c < 0x20 {
			d.fail("control character in string")
			return nil
		}
		d.i++
	}
	d.fail("unterminated string")
	return nil
}

func (d *dec) unescape(start int) []byte {
	out := append([]byte(nil), d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return out
		case c < 0x20:
			d.fail("control character in string")
			return nil
		case c != '\\':
			out = append(out, c)
			d.i++
			continue
		}
		d.i++
		if d.i >= len(d.b) {
			break
		}
		e := d.b[d.i]
		d.i++
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
			r, ok := d.hex4()
			if !ok {
				return nil
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if d.i+1 < len(d.b) && d.b[d.i] == '\\' && d.b[d.i+1] == 'u' {
					save := d.i
					d.i += 2
					if r2, ok = d.hex4(); !ok {
						return nil
					}
					if utf16.DecodeRune(r, r2) == utf8.RuneError {
						d.i = save
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
			d.fail("bad escape")
			return nil
		}
	}
	d.fail("unterminated string")
	return nil
}

func (d *dec) hex4() (rune, bool) {
	if len(d.b)-d.i < 4 {
		d.fail("short \\u escape")
		return 0, false
	}
	v, err := strconv.ParseUint(string(d.b[d.i:d.i+4]), 16, 32)
	if err != nil {
		d.fail("bad \\u escape")
		return 0, false
	}
	d.i += 4
	return rune(v), true
}

func (d *dec) boolean() bool {
	switch d.peek() {
	case 't':
		if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "true" {
			d.i += 4
			return true
		}
	case 'f':
		if len(d.b)-d.i >= 5 && string(d.b[d.i:d.i+5]) == "false" {
			d.i += 5
			return false
		}
	case 'n':
		if d.null() {
			return false
		}
	}
	d.fail("expected a boolean")
	return false
}

// number returns a number's literal.
func (d *dec) number() []byte {
	d.peek()
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		if !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
			break
		}
		d.i++
	}
	if d.i == start {
		d.fail("expected a number")
	}
	return d.b[start:d.i]
}

func (d *dec) int32() int32 {
	if d.null() {
		return 0
	}
	v, err := strconv.ParseInt(string(d.number()), 10, 32)
	if err != nil {
		d.fail("bad integer")
	}
	return int32(v)
}

func (d *dec) float() *float64 {
	if d.null() {
		return nil
	}
	v, err := strconv.ParseFloat(string(d.number()), 64)
	if err != nil {
		d.fail("bad number")
	}
	return &v
}

// skip reads any value.
func (d *dec) skip() {
	switch d.peek() {
	case '{':
		d.object(func([]byte) { d.skip() })
	case '[':
		d.array(d.skip)
	case '"':
		d.strBytes()
	case 't', 'f':
		d.boolean()
	case 'n':
		if !d.null() {
			d.fail("bad literal")
		}
	default:
		d.number()
	}
}

// end checks nothing but space follows the document.
func (d *dec) end() {
	d.ws()
	if d.err == nil && d.i != len(d.b) {
		d.fail("data after the document")
	}
}
