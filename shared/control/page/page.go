// Package page is the control plane's paging of list routes: page sizes,
// and cursors bound to the query that made them.
package page

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/batchwork/batchwork/shared/spec"
)

// Page sizes of the list routes.
const (
	DefaultSize = 50
	MaxSize     = 200
	// MaxReads bounds the Queries one page may take when a filter
	// matches little: the page then comes back short, with a cursor.
	MaxReads = 25
)

// A cursor is opaque to clients: the position to continue from, bound to
// the query that produced it by a hash of the query (route, owner, job and
// filters). A cursor replayed against another query, another job or by
// another owner is rejected as a bad request instead of silently paging
// through the wrong results. The position only ever selects where to start
// inside a partition the server derives from the authenticated owner and
// job, so a forged position cannot reach anyone else's data.
type cursor struct {
	Q string   `json:"q"`
	P []string `json:"p"`
}

// Query identifies a query; parts are the route, owner, job and
// filters in a fixed order.
func Query(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Encode makes a cursor of query at pos.
func Encode(query string, pos ...string) string {
	raw, _ := json.Marshal(cursor{Q: query, P: pos})
	return base64.RawURLEncoding.EncodeToString(raw)
}

// Decode returns the position of a cursor of query with n fields,
// or a field error naming "cursor".
func Decode(query, s string, n int) ([]string, error) {
	bad := &spec.FieldError{Field: "cursor", Message: "is not a cursor of this query; start again without it"}
	if len(s) > 512 {
		return nil, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	var c cursor
	if err := json.Unmarshal(raw, &c); err != nil || c.Q != query || len(c.P) != n {
		return nil, bad
	}
	return c.P, nil
}

// Ints decodes a cursor whose position is n non-negative integers.
func Ints(query, s string, n int) ([]int, error) {
	pos, err := Decode(query, s, n)
	if err != nil {
		return nil, err
	}
	out := make([]int, n)
	for i, p := range pos {
		v, err := strconv.Atoi(p)
		if err != nil || v < -1 || strings.TrimSpace(p) != p {
			return nil, &spec.FieldError{Field: "cursor", Message: "is not a cursor of this query; start again without it"}
		}
		out[i] = v
	}
	return out, nil
}

// CheckLimit validates a page size; 0 takes the default.
func CheckLimit(n int) (int, error) {
	switch {
	case n == 0:
		return DefaultSize, nil
	case n < 0 || n > MaxSize:
		return 0, &spec.FieldError{Field: "limit", Message: "must be between 1 and " + strconv.Itoa(MaxSize)}
	}
	return n, nil
}
