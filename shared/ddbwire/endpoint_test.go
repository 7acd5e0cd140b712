package ddbwire_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/shared/ddbwire"
)

// urlRecorder is an HTTP client that answers every request with {} and
// keeps the URL it was sent to, so the SDK's client and the lean one,
// built from one config, can be compared on where they send.
type urlRecorder struct {
	mu   sync.Mutex
	urls []string
}

func (r *urlRecorder) Do(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL.String())
	r.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

func (r *urlRecorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.urls[len(r.urls)-1]
}

// sentTo returns the URL the SDK's client and the lean client send a
// GetItem to, for cfg.
func sentTo(t *testing.T, cfg aws.Config) (sdkURL, leanURL string) {
	t.Helper()
	rec := &urlRecorder{}
	cfg.HTTPClient = rec
	cfg.Credentials = credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")
	cfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	in := &dynamodb.GetItemInput{TableName: table, Key: key}
	if _, err := dynamodb.NewFromConfig(cfg).GetItem(context.Background(), in); err != nil {
		t.Fatalf("SDK: %v", err)
	}
	sdkURL = rec.last()
	lean, err := ddbwire.New(cfg)
	if err != nil {
		t.Fatalf("lean: New: %v", err)
	}
	if _, err := lean.GetItem(context.Background(), in); err != nil {
		t.Fatalf("lean: %v", err)
	}
	return sdkURL, rec.last()
}

// TestReviewEndpointOutsideTheAWSPartition: New builds the endpoint as
// "https://dynamodb.<region>.amazonaws.com/" for every region, so in the
// other partitions (China, ISO, the European Sovereign Cloud) the lean
// client, the store's default, sends every request to a host that does
// not exist (the SDK's endpoint rules give .amazonaws.com.cn, .c2s.ic.gov,
// .amazonaws.eu): every store call fails with a DNS error there, while
// BATCHWORK_DYNAMO_CLIENT=sdk works. New should take the endpoint from
// the SDK's own resolver (o.EndpointResolverV2 with the region, the base
// endpoint and the FIPS/dual-stack flags), once, or refuse the region.
func TestReviewEndpointOutsideTheAWSPartition(t *testing.T) {
	for _, region := range []string{"us-east-1", "cn-north-1", "cn-northwest-1", "us-iso-east-1", "eusc-de-east-1"} {
		t.Run(region, func(t *testing.T) {
			sdkURL, leanURL := sentTo(t, aws.Config{Region: region})
			if strings.TrimSuffix(sdkURL, "/") != strings.TrimSuffix(leanURL, "/") {
				t.Errorf("region %s: the SDK sends to %s, the lean client to %s", region, sdkURL, leanURL)
			}
		})
	}
}

// TestReviewBaseEndpointWithAPath: with a base endpoint that has a path
// (AWS_ENDPOINT_URL_DYNAMODB=http://proxy/ddb, a gateway in front of
// DynamoDB), the SDK posts to the path as given ("/ddb"); the lean client
// appends a slash ("/ddb/"), which a router matching the exact path does
// not serve. New should keep the base endpoint's path as it is and only
// use "/" when it has none (smithyhttp.JoinPath(path, "/")).
func TestReviewBaseEndpointWithAPath(t *testing.T) {
	sdkURL, leanURL := sentTo(t, aws.Config{Region: "us-east-1", BaseEndpoint: aws.String("http://gateway.example:8080/ddb")})
	if sdkURL != leanURL {
		t.Errorf("the SDK sends to %s, the lean client to %s", sdkURL, leanURL)
	}
}
