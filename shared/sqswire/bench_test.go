package sqswire_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/batchwork/batchwork/shared/sqswire"
)

// A received task message as the queues send one: a small JSON body with
// its MD5 and a trace-context attribute.
var (
	benchBody    = `{"job":"J01HZX3Q8W6Y4T2R0P9N7M5K3","stage":"map","task":17,"attempt":1}`
	benchReceive = `{"Messages":[{"MessageId":"5fea7756-0ea4-451a-a703-a558b933e274","ReceiptHandle":"MbZj6wDWli+JvwwJaBV+3dcjk2YW2vA3+STFFljTM8tJJg6HRG6PYSasuWXPJB+CwLj1FjgXUv1uSj1gUPAWV66FU/WeR4mq2OKpEGYWbnLmpRCJVAyeMjeU5ZBdtcQ+QEauMZc8ZRv37sIW2iJKq3M9MFx1YvV11A2x/KSbkJ0=",` +
		`"MD5OfBody":"` + md5hex(benchBody) + `","Body":` + jsonString(benchBody) + `,"Attributes":{"ApproximateReceiveCount":"1"},` +
		`"MD5OfMessageAttributes":"00000000000000000000000000000000","MessageAttributes":{"traceparent":{"DataType":"String","StringValue":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}]}`
	benchDelete = `{"Successful":[{"Id":"0"}]}`
)

// benchServer answers ReceiveMessage and DeleteMessageBatch with canned
// answers on loopback.
func benchServer(tb testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		answer := benchDelete
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".ReceiveMessage") {
			answer = benchReceive
		}
		_, _ = io.WriteString(w, answer)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

// BenchmarkReceiveDelete compares the SDK's client with the lean one on
// an executor's receive and delete of one task message against a
// loopback server: the difference is the client's own cost.
func BenchmarkReceiveDelete(b *testing.B) {
	for _, name := range []string{"sdk", "lean"} {
		b.Run(name, func(b *testing.B) {
			q, err := sqswire.ForQueues(testConfig(benchServer(b).URL), map[string]string{"sdk": "sdk"}[name])
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			url := aws.String(queueURL)
			recv := &sqs.ReceiveMessageInput{QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
				MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"ApproximateReceiveCount"}}
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				out, err := q.ReceiveMessage(ctx, recv)
				if err != nil || len(out.Messages) != 1 {
					b.Fatal(err)
				}
				del := &sqs.DeleteMessageBatchInput{QueueUrl: url, Entries: []types.DeleteMessageBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: out.Messages[0].ReceiptHandle}}}
				if _, err := q.DeleteMessageBatch(ctx, del); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// reportCPU reports the process's CPU time per operation (client and
// server: the server's share is the same for both clients), which the
// shared machine's load disturbs less than the wall time.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-µs/op")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
