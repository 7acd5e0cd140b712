// Package termsafe makes text from elsewhere safe to print on a terminal.
package termsafe

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text the CLI prints comes from places it does not control: job and stage
// errors carry a program's stderr, log lines carry task values, names and
// messages come from the server. A terminal acts on control characters (ESC
// starts a sequence that can move the cursor, rewrite lines or set the
// window's title; CR overwrites a line; C1 controls such as U+009B act as
// ESC [ on some terminals) and bidi overrides reorder what is shown, so any
// of them reaching the terminal raw can hide or forge what the user reads.
// Every print path of the CLI sends such text through Text (or Block), which
// shows those characters as escapes instead.

// Text is s with every control character (C0, DEL, C1), every bidi
// formatting character and every byte that is not UTF-8 written as a
// visible escape (\x1b, \r, \u202e, \xff). Line ends are escaped too: the
// result is one line.
func Text(s string) string {
	if !NeedsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case UnsafeRune(r):
			b.WriteString(escapeRune(r))
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Block is s for several lines of a terminal, as a multi-line error
// (an exec program's last stderr lines) is meant to be read: each line
// through Text, and every line after the first indented, so that none
// can pass for a line of the CLI's own.
func Block(s, indent string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = Text(l)
	}
	return strings.Join(lines, "\n"+indent)
}

func NeedsEscape(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || UnsafeRune(r) {
			return true
		}
		i += size
	}
	return false
}

// UnsafeRune reports a control character or a bidi formatting character
// (the embeddings, overrides and isolates, and the marks).
func UnsafeRune(r rune) bool {
	switch {
	case unicode.IsControl(r):
		return true
	case r == '\u061c', r == '\u200e', r == '\u200f',
		r >= '\u202a' && r <= '\u202e',
		r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}

func escapeRune(r rune) string {
	switch r {
	case '\a':
		return `\a`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	case '\v':
		return `\v`
	}
	if r < 0x80 {
		return fmt.Sprintf(`\x%02x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// JSON rewrites a JSON document so that the C1 controls and bidi
// formatting characters it carries raw inside strings are written as \u
// escapes: the same JSON value, safe on a terminal. A JSON string cannot
// hold C0 controls raw; a byte that is not UTF-8 becomes U+FFFD, as
// encoding/json writes it.
func JSON(doc []byte) []byte {
	if !NeedsEscape(string(doc)) {
		return doc
	}
	var b bytes.Buffer
	for i := 0; i < len(doc); {
		r, size := utf8.DecodeRune(doc[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		case r >= 0x80 && UnsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.Write(doc[i : i+size])
		}
		i += size
	}
	return b.Bytes()
}
