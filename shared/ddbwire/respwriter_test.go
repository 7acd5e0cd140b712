package ddbwire_test

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
)

// responseWriter records a handler's answer as an *http.Response.
type responseWriter struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func newResponseWriter() *responseWriter { return &responseWriter{h: http.Header{}, status: 200} }

func (w *responseWriter) Header() http.Header         { return w.h }
func (w *responseWriter) WriteHeader(s int)           { w.status = s }
func (w *responseWriter) Write(b []byte) (int, error) { return w.body.Write(b) }

func (w *responseWriter) response() *http.Response {
	return &http.Response{StatusCode: w.status, Status: strconv.Itoa(w.status), Header: w.h, Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len())}
}
