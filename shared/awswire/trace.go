package awswire

import (
	"net/http"
	"os"
)

// traceHeader sets X-Amzn-Trace-Id from _X_AMZN_TRACE_ID on Lambda, as
// the SDK's recursion detection middleware does: the Lambda runtime sets
// the variable per invocation, and X-Ray links the invocation's calls by it.
func traceHeader(h http.Header, inLambda bool) {
	if !inLambda {
		return
	}
	if id, ok := os.LookupEnv("_X_AMZN_TRACE_ID"); ok && id != "" {
		h["X-Amzn-Trace-Id"] = []string{percentEncode(id)}
	}
}

// percentEncode is the SDK's encoding of the trace ID: bytes other than
// letters, digits and -=;:+&[]{}"', as %XX.
func percentEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		keep := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		switch c {
		case '-', '=', ';', ':', '+', '&', '[', ']', '{', '}', '"', '\'', ',':
			keep = true
		}
		if keep {
			if b != nil {
				b = append(b, c)
			}
			continue
		}
		if b == nil {
			b = append([]byte(nil), s[:i]...)
		}
		b = append(b, '%', hex[c>>4], hex[c&0xf])
	}
	if b == nil {
		return s
	}
	return string(b)
}

func lookup(name string) bool {
	_, ok := os.LookupEnv(name)
	return ok
}
