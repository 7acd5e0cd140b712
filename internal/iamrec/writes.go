package iamrec

import (
	"context"
	"sort"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ObjectWrite is one S3 request that changes an object (IAM authorizes it
// as s3:PutObject, s3:PutObjectTagging or s3:DeleteObject), as it went
// out: the conditional headers are read off the HTTP request, after
// serialization, so what a bucket policy's s3:if-none-match and
// s3:if-match keys see is what is recorded. A DeleteObjects request is
// one write per key.
type ObjectWrite struct {
	// Function is the deployed function the request is attributed to
	// (WithFunction), or "" for test setup and the local tools.
	Function  string
	Operation string
	// Action is the IAM action that authorizes the request.
	Action string
	Bucket string
	Key    string
	// Creation is s3:ObjectCreationOperation: true for the requests that
	// create an object (PutObject, CompleteMultipartUpload, CopyObject),
	// false for the steps of a multipart upload that cannot carry a
	// conditional header (CreateMultipartUpload, UploadPart,
	// UploadPartCopy).
	Creation bool
	// IfNoneMatch and IfMatch are the headers' values; HasIfNoneMatch and
	// HasIfMatch whether the request carried them at all.
	IfNoneMatch, IfMatch       string
	HasIfNoneMatch, HasIfMatch bool
}

// objectWriteOps maps the S3 operations that change objects to the IAM
// action that authorizes them and, for s3:PutObject, to
// s3:ObjectCreationOperation.
var objectWriteOps = map[string]struct {
	action   string
	creation bool
}{
	"PutObject": {"s3:PutObject", true}, "CompleteMultipartUpload": {"s3:PutObject", true}, "CopyObject": {"s3:PutObject", true},
	"CreateMultipartUpload": {"s3:PutObject", false}, "UploadPart": {"s3:PutObject", false}, "UploadPartCopy": {"s3:PutObject", false},
	"PutObjectTagging": {"s3:PutObjectTagging", false}, "DeleteObjectTagging": {"s3:DeleteObjectTagging", false},
	"DeleteObject": {"s3:DeleteObject", false}, "DeleteObjects": {"s3:DeleteObject", false},
}

// WriteRecorder records every object write of the clients it is installed
// in, with the conditional headers each request carried. The zero value
// is not usable; call NewWriteRecorder.
type WriteRecorder struct {
	mu     sync.Mutex
	writes map[ObjectWrite]int
}

// NewWriteRecorder returns an empty recorder.
func NewWriteRecorder() *WriteRecorder { return &WriteRecorder{writes: map[ObjectWrite]int{}} }

const writeMiddlewareID = "batchwork.iamrec.writes"

type writeTarget struct {
	bucket string
	keys   []string
}

type writeTargetKey struct{}

// Install adds the recorder to cfg's API options. Every attempt of a
// request is recorded (the recorder sits below the retry loop), tagged
// with a function or not: a bucket policy binds every principal.
// Installing twice is harmless.
func (r *WriteRecorder) Install(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, func(st *middleware.Stack) error {
		if _, ok := st.Finalize.Get(writeMiddlewareID); ok {
			return nil
		}
		// The typed input (bucket and key) is seen in Initialize, the
		// headers as sent in Finalize.
		if err := st.Initialize.Add(middleware.InitializeMiddlewareFunc(writeMiddlewareID,
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if b, keys, ok := writeTargetOf(in.Parameters); ok {
					ctx = context.WithValue(ctx, writeTargetKey{}, writeTarget{b, keys})
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After); err != nil {
			return err
		}
		return st.Finalize.Add(middleware.FinalizeMiddlewareFunc(writeMiddlewareID,
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				if awsmiddleware.GetServiceID(ctx) == s3.ServiceID {
					op := awsmiddleware.GetOperationName(ctx)
					kind, isWrite := objectWriteOps[op]
					tgt, _ := ctx.Value(writeTargetKey{}).(writeTarget)
					if req, ok := in.Request.(*smithyhttp.Request); ok && isWrite {
						w := ObjectWrite{Function: FunctionOf(ctx), Operation: op, Action: kind.action, Bucket: tgt.bucket, Creation: kind.creation}
						w.IfNoneMatch, w.HasIfNoneMatch = header(req, "If-None-Match")
						w.IfMatch, w.HasIfMatch = header(req, "If-Match")
						r.mu.Lock()
						for _, k := range tgt.keys {
							w.Key = k
							r.writes[w]++
						}
						r.mu.Unlock()
					}
				}
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	})
}

func header(req *smithyhttp.Request, name string) (string, bool) {
	v, ok := req.Header[name]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[0], true
}

// writeTargetOf returns the bucket and keys an object write names.
func writeTargetOf(input any) (bucket string, keys []string, ok bool) {
	one := func(b, k *string) (string, []string, bool) { return aws.ToString(b), []string{aws.ToString(k)}, true }
	switch in := input.(type) {
	case *s3.PutObjectInput:
		return one(in.Bucket, in.Key)
	case *s3.CompleteMultipartUploadInput:
		return one(in.Bucket, in.Key)
	case *s3.CopyObjectInput:
		return one(in.Bucket, in.Key)
	case *s3.CreateMultipartUploadInput:
		return one(in.Bucket, in.Key)
	case *s3.UploadPartInput:
		return one(in.Bucket, in.Key)
	case *s3.UploadPartCopyInput:
		return one(in.Bucket, in.Key)
	case *s3.PutObjectTaggingInput:
		return one(in.Bucket, in.Key)
	case *s3.DeleteObjectTaggingInput:
		return one(in.Bucket, in.Key)
	case *s3.DeleteObjectInput:
		return one(in.Bucket, in.Key)
	case *s3.DeleteObjectsInput:
		if in.Delete != nil {
			for _, o := range in.Delete.Objects {
				keys = append(keys, aws.ToString(o.Key))
			}
		}
		return aws.ToString(in.Bucket), keys, true
	}
	return "", nil, false
}

// Writes returns what was recorded, each distinct write with the number
// of requests that made it, sorted by bucket, key and operation.
func (r *WriteRecorder) Writes() []RecordedWrite {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]RecordedWrite, 0, len(r.writes))
	for w, n := range r.writes {
		out = append(out, RecordedWrite{ObjectWrite: w, Requests: n})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Bucket != b.Bucket {
			return a.Bucket < b.Bucket
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		if a.Operation != b.Operation {
			return a.Operation < b.Operation
		}
		return a.Function < b.Function
	})
	return out
}

// RecordedWrite is a distinct write and how many requests made it.
type RecordedWrite struct {
	ObjectWrite
	Requests int
}
