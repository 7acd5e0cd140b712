package lambdatask

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// TestSDKInvoker: the SDK adapter invokes synchronously (RequestResponse)
// the function named, with the event as its payload, and reports the
// response payload and Lambda's function error.
func TestSDKInvoker(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, fnErr string
	}{{"success", ""}, {"function error", "Unhandled"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var path, invocationType, body string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				path, invocationType = r.URL.Path, r.Header.Get("X-Amz-Invocation-Type")
				b, _ := io.ReadAll(r.Body)
				body = string(b)
				if tt.fnErr != "" {
					w.Header().Set("X-Amz-Function-Error", tt.fnErr)
				}
				w.Write([]byte(`{"outputs": []}`))
			}))
			defer srv.Close()
			cfg := aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL),
				Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")}
			resp, fnErr, err := NewInvoker(cfg).Invoke(context.Background(), "my-fn:live", []byte(`{"task": {}}`))
			if err != nil {
				t.Fatal(err)
			}
			if path != "/2015-03-31/functions/my-fn:live/invocations" || invocationType != "RequestResponse" || body != `{"task": {}}` {
				t.Errorf("request %s, invocation type %q, body %q", path, invocationType, body)
			}
			if string(resp) != `{"outputs": []}` || fnErr != tt.fnErr {
				t.Errorf("response %q, function error %q; want the payload and %q", resp, fnErr, tt.fnErr)
			}
		})
	}
}
