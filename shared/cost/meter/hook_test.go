package meter

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/cost"
	"github.com/batchwork/batchwork/shared/ddbwire"
)

// TestMeterSeesTheLeanClient: installed on a config, the meter counts the
// lean DynamoDB client's calls for their job as it counts the SDK's: it
// asks for the consumed capacity (the request carries
// ReturnConsumedCapacity, the caller's input is left as it was) and
// records the units answered.
func TestMeterSeesTheLeanClient(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		_, _ = io.WriteString(w, `{"Attributes":{},"ConsumedCapacity":{"TableName":"t","CapacityUnits":3}}`)
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
	m := New(jobOf)
	m.Install(&cfg)
	db, err := ddbwire.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	in := &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}}}
	if _, err := db.UpdateItem(WithJob(context.Background(), "j1"), in); err != nil {
		t.Fatal(err)
	}
	if got := m.Take("j1"); got != (cost.Counts{DynamoRequests: 1, DynamoWriteUnits: 3}) {
		t.Fatalf("counted %+v", got)
	}
	if len(bodies) != 1 || !strings.Contains(bodies[0], `"ReturnConsumedCapacity":"`) || in.ReturnConsumedCapacity != "" {
		t.Fatalf("sent %q; caller's input asks %q", bodies, in.ReturnConsumedCapacity)
	}
}
