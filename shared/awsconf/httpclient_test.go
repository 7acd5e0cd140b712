package awsconf

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Which client Harden leaves a config with.
func TestHardenHTTPClient(t *testing.T) {
	custom := &http.Client{}
	cases := []struct {
		name   string
		cfg    aws.Config
		direct bool // the JSON RPC shortcut
		keep   aws.HTTPClient
	}{
		{"none (an emulator's config)", aws.Config{}, true, nil},
		{"the SDK's buildable client (LoadDefaultConfig's)", aws.Config{HTTPClient: awshttp.NewBuildableClient()}, true, nil},
		{"a buildable client with a timeout", aws.Config{HTTPClient: awshttp.NewBuildableClient().WithTimeout(5)}, false, nil},
		{"a defaults mode the SDK applies per service", aws.Config{DefaultsMode: aws.DefaultsModeStandard}, false, nil},
		{"the caller's own client", aws.Config{HTTPClient: custom}, false, custom},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			Harden(&cfg)
			if c.keep != nil {
				if cfg.HTTPClient != c.keep {
					t.Fatalf("client %T replaced", c.keep)
				}
				return
			}
			hc, direct := cfg.HTTPClient.(httpClient)
			if direct != c.direct {
				t.Fatalf("client %T, want the JSON RPC shortcut %v", cfg.HTTPClient, c.direct)
			}
			idle := hc.idlePerHost
			if !direct {
				b, ok := cfg.HTTPClient.(*awshttp.BuildableClient)
				if !ok {
					t.Fatalf("client %T, want the SDK's buildable client", cfg.HTTPClient)
				}
				idle = b.GetTransport().MaxIdleConnsPerHost
			}
			if idle < MaxIdleConnsPerHost {
				t.Fatalf("MaxIdleConnsPerHost %d, want %d", idle, MaxIdleConnsPerHost)
			}
			again := cfg
			Harden(&again)
			if h, ok := again.HTTPClient.(httpClient); ok && h.full != hc.full {
				t.Fatal("a second Harden replaced the client")
			}
		})
	}
}

// Requests of the JSON RPC protocols reach the server and back through the
// shortcut, one connection reused, and others go through http.Client,
// which follows a 307 as the SDK's client does.
func TestHTTPClientRoutes(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/moved":
			http.Redirect(w, r, "/bucket/key", http.StatusTemporaryRedirect)
		case r.Header.Get("X-Amz-Target") != "":
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			io.WriteString(w, `{"TableNames":["t"]}`)
		default:
			io.WriteString(w, "object")
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")}
	Harden(&cfg)
	db := dynamodb.NewFromConfig(cfg)
	// A connection goes back to the idle pool just after its response's
	// body is read, so a next request may race it and dial: reuse shows
	// as far fewer connections than requests, not exactly one.
	const requests = 20
	for i := 0; i < requests; i++ {
		out, err := db.ListTables(context.Background(), &dynamodb.ListTablesInput{})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.TableNames) != 1 || out.TableNames[0] != "t" {
			t.Fatalf("tables %v", out.TableNames)
		}
	}
	if n := conns.Load(); n > requests/4 {
		t.Fatalf("%d connections for %d sequential requests, want them reused (at most %d)", n, requests, requests/4)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/moved", nil)
	resp, err := cfg.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "object" {
		t.Fatalf("a REST request's 307 was not followed: %q", body)
	}
}

// A connection error through the shortcut is a *url.Error, as through
// http.Client, and the SDK's retryer retries it.
func TestHTTPClientConnectionError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	cfg := aws.Config{}
	Harden(&cfg)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", nil)
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	_, err = cfg.HTTPClient.Do(req)
	var ue *url.Error
	if !errors.As(err, &ue) || ue.Op != "Post" {
		t.Fatalf("error %v (%T), want a *url.Error of a Post", err, err)
	}
	if retry.NewStandard().IsErrorRetryable(err) != true {
		t.Fatalf("the retryer does not retry %v", err)
	}
}

// A DynamoDB request through the SDK's client and through Harden's, over
// loopback to an in-process server (whose CPU is in both): the shortcut
// skips http.Client's header copy, and 16 goroutines keep their
// connections instead of dialing past the SDK's 10 idle ones.
func BenchmarkHTTPClient(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		io.WriteString(w, `{"TableNames":["t"]}`)
	}))
	defer srv.Close()
	for _, c := range []struct {
		name   string
		harden bool
	}{{"sdk", false}, {"harden", true}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")}
			if c.harden {
				Harden(&cfg)
			}
			db := dynamodb.NewFromConfig(cfg)
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := db.ListTables(context.Background(), &dynamodb.ListTablesInput{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
