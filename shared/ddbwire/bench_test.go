package ddbwire_test

import (
	"context"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/ddbwire"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/awsconf"
)

// canned answers every request with body, signed with its CRC32.
func canned(tb testing.TB, status int, body string) *httptest.Server {
	crc := strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amz-Crc32", crc)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

func testConfig(url string) aws.Config {
	cfg := aws.Config{
		Region:       "us-east-1",
		Credentials:  aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider("AKID", "SECRET", "TOKEN")),
		BaseEndpoint: aws.String(url),
	}
	awsconf.Harden(&cfg)
	return cfg
}

// A claim-like conditional update and a task read, as the store sends them.
func benchUpdate() *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName: aws.String("batchwork"),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "JOB#01JABCDEFGHJKMNPQRSTVWXYZ"},
			"sk": &types.AttributeValueMemberS{Value: "TASK#stage-1#000123"},
		},
		UpdateExpression:    aws.String("SET #st = :claimed, #tok = :tok, #lease = :lease, #att = #att + :one"),
		ConditionExpression: aws.String("#st = :ready AND (attribute_not_exists(#tok) OR #lease < :now)"),
		ExpressionAttributeNames: map[string]string{
			"#st": "status", "#tok": "token", "#lease": "lease", "#att": "attempt",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":claimed": &types.AttributeValueMemberS{Value: "CLAIMED"},
			":ready":   &types.AttributeValueMemberS{Value: "READY"},
			":tok":     &types.AttributeValueMemberS{Value: "3f1c8d0e-6a55-4c1e-9a65-5d1f4f3a2b10"},
			":lease":   &types.AttributeValueMemberN{Value: "1767225600123"},
			":now":     &types.AttributeValueMemberN{Value: "1767225590123"},
			":one":     &types.AttributeValueMemberN{Value: "1"},
		},
		ReturnValues:           types.ReturnValueAllNew,
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}
}

const benchUpdateAnswer = `{"Attributes":{"pk":{"S":"JOB#01JABCDEFGHJKMNPQRSTVWXYZ"},"sk":{"S":"TASK#stage-1#000123"},"status":{"S":"CLAIMED"},"token":{"S":"3f1c8d0e-6a55-4c1e-9a65-5d1f4f3a2b10"},"lease":{"N":"1767225600123"},"attempt":{"N":"1"},"spec":{"M":{"fn":{"S":"noop"},"params":{"L":[{"S":"a"},{"N":"2"}]}}},"split":{"B":"AAECAwQ="}},"ConsumedCapacity":{"TableName":"batchwork","CapacityUnits":1.0}}`

const benchGetAnswer = `{"Item":{"pk":{"S":"JOB#01JABCDEFGHJKMNPQRSTVWXYZ"},"sk":{"S":"JOB"},"status":{"S":"RUNNING"},"owner":{"S":"arn:aws:iam::123456789012:user/alice"},"gen":{"N":"3"}},"ConsumedCapacity":{"TableName":"batchwork","CapacityUnits":0.5}}`

func benchGet() *dynamodb.GetItemInput {
	return &dynamodb.GetItemInput{
		TableName: aws.String("batchwork"),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "JOB#01JABCDEFGHJKMNPQRSTVWXYZ"},
			"sk": &types.AttributeValueMemberS{Value: "JOB"},
		},
		ConsistentRead:         aws.Bool(true),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}
}

func benchClients(b *testing.B, answer string) map[string]interface {
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
} {
	cfg := testConfig(canned(b, 200, answer).URL)
	lean, err := ddbwire.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return map[string]interface {
		UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
		GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	}{"sdk": dynamodb.NewFromConfig(cfg), "lean": lean}
}

// BenchmarkUpdateItem and BenchmarkGetItem compare the SDK's client with
// the lean one on one request against a loopback server with a canned
// answer: the difference is the client's own cost per request.
func BenchmarkUpdateItem(b *testing.B) {
	for _, name := range []string{"sdk", "lean"} {
		b.Run(name, func(b *testing.B) {
			c := benchClients(b, benchUpdateAnswer)[name]
			in := benchUpdate()
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				if _, err := c.UpdateItem(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkGetItem(b *testing.B) {
	for _, name := range []string{"sdk", "lean"} {
		b.Run(name, func(b *testing.B) {
			c := benchClients(b, benchGetAnswer)[name]
			in := benchGet()
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				if _, err := c.GetItem(context.Background(), in); err != nil {
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
