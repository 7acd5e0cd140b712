package emulator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// TestMotoKeepsConnectionsAlive runs one sequence of SQS and S3 requests
// (a JSON SQS body, an S3 upload, HEAD, a ranged GET, a 404) against moto
// with the launcher's keep-alive and without it (BATCHWORK_MOTO_KEEPALIVE=0):
// with it every request rides the first connection; without it every
// request dials its own; the answers are the same either way.
func TestMotoKeepsConnectionsAlive(t *testing.T) {
	skipUnderShort(t)
	var answers [2][]string
	for i, tc := range []struct {
		keepAlive string
		wantDials func(requests int) int
	}{
		{keepAlive: "", wantDials: func(int) int { return 1 }},
		{keepAlive: "0", wantDials: func(requests int) int { return requests }},
	} {
		t.Run("BATCHWORK_MOTO_KEEPALIVE="+tc.keepAlive, func(t *testing.T) {
			t.Setenv("BATCHWORK_MOTO_KEEPALIVE", tc.keepAlive)
			e := startTestMoto(t)
			var dials atomic.Int64
			var d net.Dialer
			tr := &http.Transport{
				DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
					dials.Add(1)
					return d.DialContext(ctx, network, addr)
				},
				MaxIdleConnsPerHost: 1,
			}
			defer tr.CloseIdleConnections()
			cfg := e.AWSConfig()
			cfg.HTTPClient = &http.Client{Transport: tr}
			var requests int
			answers[i] = keepAliveSequence(t, cfg, &requests)
			if got, want := int(dials.Load()), tc.wantDials(requests); got != want {
				t.Errorf("%d requests dialled %d connections, want %d", requests, got, want)
			}
		})
	}
	if a, b := strings.Join(answers[0], "\n"), strings.Join(answers[1], "\n"); a != b {
		t.Errorf("answers differ with keep-alive:\n%s\nwithout:\n%s", a, b)
	}
}

// keepAliveSequence makes its requests one after another and returns what
// each answered, free of request ids and other per-run values.
func keepAliveSequence(t *testing.T, cfg aws.Config, requests *int) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	note := func(format string, args ...any) {
		*requests++
		out = append(out, fmt.Sprintf(format, args...))
	}

	q := sqs.NewFromConfig(cfg)
	created, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("keep")})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	note("CreateQueue %s", (*created.QueueUrl)[strings.LastIndex(*created.QueueUrl, "/"):])
	for _, body := range []string{"one", strings.Repeat("x", 70_000)} {
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: created.QueueUrl, MessageBody: aws.String(body)}); err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		note("SendMessage %d bytes", len(body))
	}
	got, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: created.QueueUrl, MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	var lens []int
	for _, m := range got.Messages {
		lens = append(lens, len(*m.Body))
	}
	note("ReceiveMessage %v", lens)
	if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: created.QueueUrl, ReceiptHandle: aws.String("not-a-handle")}); err == nil {
		t.Fatal("DeleteMessage of a made-up handle succeeded")
	} else {
		note("DeleteMessage error %T", err)
	}

	s := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("keep")}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	note("CreateBucket")
	object := bytes.Repeat([]byte("0123456789"), 20_000)
	if _, err := s.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("keep"), Key: aws.String("k"), Body: bytes.NewReader(object)}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	note("PutObject %d bytes", len(object))
	head, err := s.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("keep"), Key: aws.String("k")})
	if err != nil {
		t.Fatalf("HeadObject: %v", err)
	}
	note("HeadObject %d %s", aws.ToInt64(head.ContentLength), aws.ToString(head.ETag))
	for _, rng := range []string{"", "bytes=5-24"} {
		in := &s3.GetObjectInput{Bucket: aws.String("keep"), Key: aws.String("k")}
		if rng != "" {
			in.Range = aws.String(rng)
		}
		obj, err := s.GetObject(ctx, in)
		if err != nil {
			t.Fatalf("GetObject %q: %v", rng, err)
		}
		body, err := io.ReadAll(obj.Body)
		obj.Body.Close()
		if err != nil {
			t.Fatalf("GetObject %q body: %v", rng, err)
		}
		note("GetObject %q: %d bytes %q...", rng, len(body), body[:min(len(body), 20)])
	}
	if _, err := s.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("keep"), Key: aws.String("missing")}); err == nil {
		t.Fatal("GetObject of a missing key succeeded")
	} else {
		note("GetObject missing: error %T", err)
	}
	return out
}
