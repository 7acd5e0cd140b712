package ddbwire_test

import (
	"bufio"
	"context"
	"hash/crc32"
	"io"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/ddbwire"
)

// rawServer answers every request on a connection with the same canned
// answer, parsing no more of the request than its Content-Length: its
// CPU per request is a fraction of net/http's server's, so a benchmark's
// CPU per request is mostly the client's.
func rawServer(tb testing.TB, body string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	crc := strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10)
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Crc32: " + crc +
		"\r\nX-Amzn-Requestid: 4a6b7c8d\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := textproto.NewReader(bufio.NewReader(c))
				for {
					n := -1
					for {
						line, err := r.ReadLine()
						if err != nil {
							return
						}
						if line == "" {
							break
						}
						if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
							n, _ = strconv.Atoi(strings.TrimSpace(v))
						}
					}
					if n < 0 {
						return
					}
					if _, err := io.CopyN(io.Discard, r.R, int64(n)); err != nil {
						return
					}
					if _, err := c.Write(answer); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// BenchmarkUpdateItemRaw is BenchmarkUpdateItem's lean client against
// rawServer: its allocations and most of its CPU are the client's.
func BenchmarkUpdateItemRaw(b *testing.B) {
	c, err := ddbwire.New(testConfig(rawServer(b, benchUpdateAnswer)))
	if err != nil {
		b.Fatal(err)
	}
	in := benchUpdate()
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		if _, err := c.UpdateItem(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}
