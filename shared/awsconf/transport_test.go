package awsconf

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/shared/synchttp"
)

// Which transport sends the JSON RPC requests: synchttp's unless
// EnvTransport says net.
func TestHTTPClientTransportChoice(t *testing.T) {
	for _, c := range []struct {
		env  string
		sync bool
	}{{"", true}, {"sync", true}, {"net", false}} {
		t.Run("env="+c.env, func(t *testing.T) {
			t.Setenv(EnvTransport, c.env)
			cfg := aws.Config{}
			Harden(&cfg)
			hc, ok := cfg.HTTPClient.(httpClient)
			if !ok {
				t.Fatalf("client %T", cfg.HTTPClient)
			}
			_, isSync := hc.rpc.(*synchttp.Transport)
			if isSync != c.sync {
				t.Fatalf("JSON RPC transport %T, want synchttp's %v", hc.rpc, c.sync)
			}
			if !c.sync && hc.rpc != hc.full.Transport {
				t.Fatal("net: the JSON RPC requests do not go to the SDK's transport")
			}
		})
	}
}

// A request the SDK transport's proxy rule sends through a proxy goes
// there (through net/http, which speaks to proxies), and one it sends
// directly goes straight to the endpoint.
func TestHTTPClientProxyFallback(t *testing.T) {
	t.Setenv(EnvTransport, "")
	answer := func(tables string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			io.WriteString(w, `{"TableNames":["`+tables+`"]}`)
		}
	}
	var proxied atomic.Value
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Store(r.URL.String()) // a proxy gets the absolute URL
		answer("via proxy")(w, r)
	}))
	defer proxy.Close()
	direct := httptest.NewServer(answer("direct"))
	defer direct.Close()
	proxyURL, _ := url.Parse(proxy.URL)
	directURL, _ := url.Parse(direct.URL)
	b := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.Proxy = func(r *http.Request) (*url.URL, error) {
			if r.URL.Host == directURL.Host {
				return nil, nil
			}
			return proxyURL, nil
		}
	})
	for _, c := range []struct{ endpoint, want string }{
		{"http://dynamodb.example.invalid", "via proxy"},
		{direct.URL, "direct"},
	} {
		cfg := aws.Config{Region: "us-east-1", HTTPClient: b, BaseEndpoint: aws.String(c.endpoint), Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")}
		Harden(&cfg)
		if _, ok := cfg.HTTPClient.(httpClient).rpc.(*synchttp.Transport); !ok {
			t.Fatal("not the synchronous transport")
		}
		out, err := dynamodb.NewFromConfig(cfg).ListTables(context.Background(), &dynamodb.ListTablesInput{})
		if err != nil {
			t.Fatalf("%s: %v", c.endpoint, err)
		}
		if len(out.TableNames) != 1 || out.TableNames[0] != c.want {
			t.Fatalf("%s: answered by %v, want %q", c.endpoint, out.TableNames, c.want)
		}
	}
	if got := proxied.Load(); got != "http://dynamodb.example.invalid/" {
		t.Fatalf("the proxy got %v", got)
	}
}
