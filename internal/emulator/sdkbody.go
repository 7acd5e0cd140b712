package emulator

import (
	"context"
	"io"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// apiOptions are the SDK options of Emulator.AWSConfig, a new slice for
// each config so that callers may append to it.
func apiOptions() []func(*middleware.Stack) error {
	return []func(*middleware.Stack) error{sendBodyWithoutWriteTo}
}

// sendBodyWithoutWriteTo keeps the AWS SDK's clients from losing answers
// from an emulator. smithy-go hands net/http a request body that closes
// as soon as the answer's headers arrive and whose WriteTo, once closed,
// returns io.EOF; net/http, after sending Content-Length bytes, reads the
// body once more (through WriteTo) to check for extra bytes, takes that
// io.EOF for a failed write and closes the connection under the answer
// being read. The SDK then retries a request the server applied. A
// server on the same machine answers fast enough to win that race
// (measured: 14 answers lost in 17,000 requests to moto over kept
// connections). Over the body's Read, a closed body ends with a plain EOF,
// which net/http expects; so this middleware hands the SDK's transport a
// stream with Read and Seek (for the SDK's rewinds) but no WriteTo.
// Only clients built from Emulator.AWSConfig carry it; the lean clients
// build their own bodies.
func sendBodyWithoutWriteTo(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("BatchworkEmulatorBodyWithoutWriteTo",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if req, ok := in.Request.(*smithyhttp.Request); ok {
				if s, ok := req.GetStream().(io.ReadSeeker); ok {
					if _, hasWriteTo := s.(io.WriterTo); hasWriteTo {
						rs, err := req.SetStream(readSeeker{s})
						if err != nil {
							return middleware.FinalizeOutput{}, middleware.Metadata{}, err
						}
						in.Request = rs
					}
				}
			}
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// readSeeker hides every method of its stream but Read and Seek.
type readSeeker struct{ s io.ReadSeeker }

func (r readSeeker) Read(p []byte) (int, error)                   { return r.s.Read(p) }
func (r readSeeker) Seek(offset int64, whence int) (int64, error) { return r.s.Seek(offset, whence) }
