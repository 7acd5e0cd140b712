package awswire

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	smithyendpoints "github.com/aws/smithy-go/endpoints"
)

// An attempt's request is the one http.NewRequestWithContext makes for
// the endpoint and body, with the client's headers: its fields, its
// context, its body and GetBody's.
func TestRequestIsNewRequest(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, 1)
	cases := []struct {
		endpoint string
		body     string
		attempt  int
		max      int
	}{
		{"http://127.0.0.1:8000", `{"TableName":"t"}`, 1, 3},
		{"http://localhost:4566/base", `{"a":1}`, 3, 3},
		{"https://dynamodb.us-east-1.amazonaws.com", `{}`, 2, 3},
		{"https://dynamodb.us-east-1.amazonaws.com:443/", `{}`, 1, 5}, // another limit than the retryer's
		{"http://[::1]:8000/a%20b?x=1", `{}`, 1, 3},
		{"http://127.0.0.1:8000", "", 1, 3},
	}
	for _, c := range cases {
		t.Run(c.endpoint, func(t *testing.T) {
			u, err := url.Parse(c.endpoint)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := New(aws.Config{}, Service{ID: "DynamoDB", Package: "ddbwire", SigningName: "dynamodb", Target: "DynamoDB_20120810.", Header: map[string]string{"X-Extra": "e"}}, Options{
				Region:          "us-east-1",
				Retryer:         retry.NewStandard(),
				ResolveEndpoint: func(context.Context) (smithyendpoints.Endpoint, error) { return smithyendpoints.Endpoint{URI: *u}, nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			body := []byte(c.body)
			got, err := cl.request(ctx, "UpdateItem", body, c.attempt, c.max)
			if err != nil {
				t.Fatal(err)
			}
			want, err := http.NewRequestWithContext(ctx, http.MethodPost, cl.endpoint, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range cl.header {
				want.Header[k] = v
			}
			want.Header["X-Amz-Target"] = []string{"DynamoDB_20120810.UpdateItem"}
			want.Header["Amz-Sdk-Request"] = []string{"attempt=" + strconv.Itoa(c.attempt) + "; max=" + strconv.Itoa(c.max)}

			for _, r := range []*http.Request{got, want} {
				for _, rc := range []func() (io.ReadCloser, error){func() (io.ReadCloser, error) { return r.Body, nil }, r.GetBody} {
					b, err := rc()
					if err != nil {
						t.Fatal(err)
					}
					if all, _ := io.ReadAll(b); string(all) != c.body {
						t.Fatalf("body %q, want %q", all, c.body)
					}
				}
				r.Body, r.GetBody = nil, nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("request\n%#v\nwant\n%#v", got, want)
			}
			if got.Context() != ctx {
				t.Fatal("the request has another context")
			}
			again, _ := cl.request(ctx, "UpdateItem", body, c.attempt, c.max)
			if again.URL == got.URL {
				t.Fatal("two requests share a URL, which the signer writes")
			}
		})
	}
}
