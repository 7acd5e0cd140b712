package loadmodel

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/batchwork/batchwork/shared/ddbwire"
)

// Installed on a config, the middleware (on the SDK's client) and the hook
// (on the lean one) ask DynamoDB for the consumed capacity and record what
// it answers.
func TestInstall(t *testing.T) {
	t.Parallel()
	for _, client := range []string{"sdk", "lean"} {
		t.Run(client, func(t *testing.T) { testInstall(t, client) })
	}
}

func testInstall(t *testing.T, client string) {
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, `{"Item":{"pk":{"S":"JOB#1"},"sk":{"S":"JOB"}},"ConsumedCapacity":{"TableName":"tbl","CapacityUnits":3}}`)
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")}
	var r Recorder
	r.Install(&cfg)
	in := &dynamodb.GetItemInput{TableName: aws.String("tbl"), Key: key("JOB#1", "JOB"), ConsistentRead: aws.Bool(true)}
	db, err := ddbwire.ForStore(cfg, client)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetItem(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, `"ReturnConsumedCapacity":"INDEXES"`) {
		t.Errorf("request %s does not ask for the consumed capacity", body)
	}
	if in.ReturnConsumedCapacity != "" {
		t.Errorf("the caller's input was changed")
	}
	snap := r.Snapshot()
	if got := snap.Keys[Key{"DynamoDB", "tbl", "JOB#1"}]; got != (KeyStat{Requests: 1, Reads: 1, RCU: 3}) {
		t.Errorf("JOB#1: %+v, want 1 request, 1 read, 3 RCU (as reported)", got)
	}
	if snap.Ops["DynamoDB.GetItem"].Requests != 1 || snap.ReportedRCU != 3 {
		t.Errorf("ops %+v, reported %v RCU", snap.Ops, snap.ReportedRCU)
	}
}
