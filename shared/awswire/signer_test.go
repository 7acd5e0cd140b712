package awswire

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

var (
	ddbHeader = map[string]string{"Accept-Encoding": "identity"}
	sqsHeader = map[string]string{"X-Amzn-Query-Mode": "true"}
)

// signerClient is a core client as New builds it, without the config.
func signerClient(t testing.TB, endpoint, service, region string, extra map[string]string, inLambda bool) *Client {
	h := http.Header{
		"Content-Type": {"application/x-amz-json-1.0"},
		"User-Agent":   {"batchwork-test"},
	}
	for k, v := range extra {
		h.Set(k, v)
	}
	c := &Client{
		svc:      Service{ID: service, Package: "test", SigningName: service, Target: "Svc_1."},
		signer:   v4.NewSigner(),
		endpoint: endpoint,
		region:   region,
		header:   h,
		inLambda: inLambda,
	}
	var err error
	if c.tmpl, err = http.NewRequest(http.MethodPost, endpoint, nil); err != nil {
		t.Fatal(err)
	}
	c.own = newSigV4(endpoint, h, service, region)
	if c.own == nil {
		t.Fatalf("newSigV4(%q, %v) refused the header", endpoint, h)
	}
	return c
}

type signCase struct {
	endpoint, service, region string
	header                    map[string]string
	creds                     aws.Credentials
	body                      []byte
	attempt                   int
	when                      time.Time
}

// compareSigners signs the same request with sigv4 and with the SDK's
// v4.Signer and fails unless every header, the Host and the URL match.
func compareSigners(t *testing.T, c *Client, sc signCase) {
	t.Helper()
	sum := sha256.Sum256(sc.body)
	hash := hex.EncodeToString(sum[:])
	ctx := context.Background()
	own, err := c.request(ctx, "PutItem", sc.body, sc.attempt, 3)
	if err != nil {
		t.Fatal(err)
	}
	sdk, err := c.request(ctx, "PutItem", sc.body, sc.attempt, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.sign(ctx, own, sc.creds, hash, sc.when); err != nil {
		t.Fatal(err)
	}
	if err := c.signer.SignHTTP(ctx, sc.creds, sdk, hash, sc.service, sc.region, sc.when.UTC()); err != nil {
		t.Fatal(err)
	}
	what := fmt.Sprintf("%s %s %s header %v token %q, %d-byte body at %s", sc.endpoint, sc.service, sc.region, sc.header, sc.creds.SessionToken, len(sc.body), sc.when)
	if !reflect.DeepEqual(own.Header, sdk.Header) {
		t.Errorf("%s:\nown headers %q\nsdk headers %q", what, own.Header, sdk.Header)
	}
	if own.Host != sdk.Host || own.URL.String() != sdk.URL.String() {
		t.Errorf("%s: own host %q url %q, sdk host %q url %q", what, own.Host, own.URL, sdk.Host, sdk.URL)
	}
}

func TestSigV4MatchesTheSDKSigner(t *testing.T) {
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	session := creds
	session.SessionToken = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD+token=="
	spaced := creds
	spaced.SessionToken = "  tok  with   spaces "
	noon := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	beforeMidnight := time.Date(2026, 12, 31, 23, 59, 59, 999_000_000, time.UTC)
	afterMidnight := beforeMidnight.Add(time.Millisecond)
	local := time.Date(2026, 11, 30, 0, 30, 0, 0, time.FixedZone("CET", 3600)) // 2026-11-29 in UTC
	large := bytes.Repeat([]byte(`{"Item":{"pk":{"S":"x"}}}`), 40_000)
	cases := []struct {
		name string
		signCase
		trace string
	}{
		{"ddb, no token", signCase{"https://dynamodb.us-east-1.amazonaws.com/", "dynamodb", "us-east-1", ddbHeader, creds, []byte(`{"TableName":"t"}`), 1, noon}, ""},
		{"ddb, session token", signCase{"https://dynamodb.eu-west-1.amazonaws.com/", "dynamodb", "eu-west-1", ddbHeader, session, []byte(`{}`), 2, noon}, ""},
		{"sqs, session token", signCase{"https://sqs.ap-southeast-2.amazonaws.com/", "sqs", "ap-southeast-2", sqsHeader, session, []byte(`{"QueueUrl":"q"}`), 1, noon}, ""},
		{"sqs, china partition", signCase{"https://sqs.cn-north-1.amazonaws.com.cn/", "sqs", "cn-north-1", sqsHeader, creds, []byte(`{}`), 3, noon}, ""},
		{"empty body", signCase{"https://dynamodb.us-west-2.amazonaws.com/", "dynamodb", "us-west-2", ddbHeader, session, nil, 1, noon}, ""},
		{"large body", signCase{"https://dynamodb.us-west-2.amazonaws.com/", "dynamodb", "us-west-2", ddbHeader, session, large, 1, noon}, ""},
		{"base path", signCase{"http://localhost:8000/base/path/", "dynamodb", "us-east-1", ddbHeader, creds, []byte(`{}`), 1, noon}, ""},
		{"escaped base path", signCase{"http://127.0.0.1:4566/a%20b/c+d/", "sqs", "us-east-1", sqsHeader, session, []byte(`{}`), 1, noon}, ""},
		{"default https port", signCase{"https://dynamodb.us-east-1.amazonaws.com:443/", "dynamodb", "us-east-1", ddbHeader, creds, []byte(`{}`), 1, noon}, ""},
		{"default http port", signCase{"http://localhost:80/", "sqs", "us-east-1", sqsHeader, creds, []byte(`{}`), 1, noon}, ""},
		{"ipv6 host", signCase{"http://[::1]:8000/", "dynamodb", "us-east-1", ddbHeader, creds, []byte(`{}`), 1, noon}, ""},
		{"endpoint with a query", signCase{"http://localhost:8000/?b=2&a=1+x&a=0", "dynamodb", "us-east-1", ddbHeader, creds, []byte(`{}`), 1, noon}, ""},
		{"trace header", signCase{"https://sqs.us-east-1.amazonaws.com/", "sqs", "us-east-1", sqsHeader, session, []byte(`{}`), 1, noon}, "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1 lambda"},
		{"before midnight", signCase{"https://dynamodb.us-east-1.amazonaws.com/", "dynamodb", "us-east-1", ddbHeader, session, []byte(`{}`), 1, beforeMidnight}, ""},
		{"after midnight", signCase{"https://dynamodb.us-east-1.amazonaws.com/", "dynamodb", "us-east-1", ddbHeader, session, []byte(`{}`), 1, afterMidnight}, ""},
		{"local time zone", signCase{"https://dynamodb.us-east-1.amazonaws.com/", "dynamodb", "us-east-1", ddbHeader, session, []byte(`{}`), 1, local}, ""},
		{"token with spaces", signCase{"https://sqs.us-east-1.amazonaws.com/", "sqs", "us-east-1", sqsHeader, spaced, []byte(`{}`), 1, noon}, ""},
		{"header value with spaces", signCase{"https://sqs.us-east-1.amazonaws.com/", "sqs", "us-east-1", map[string]string{"X-Custom": "  a   b\t"}, creds, []byte(`{}`), 1, noon}, ""},
		{"no constant headers", signCase{"https://sqs.us-east-1.amazonaws.com/", "sqs", "us-east-1", nil, creds, []byte(`{}`), 1, noon}, ""},
		{"headers sorted after x-amz-target", signCase{"https://sqs.us-east-1.amazonaws.com/", "sqs", "us-east-1", map[string]string{"Zz-Last": "z", "X-Amz-Zeta": "1", "Aa-First": "a"}, session, []byte(`{}`), 1, noon}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.trace != "" {
				t.Setenv("_X_AMZN_TRACE_ID", tc.trace)
			}
			c := signerClient(t, tc.endpoint, tc.service, tc.region, tc.header, tc.trace != "")
			compareSigners(t, c, tc.signCase)
			// Again with the key cached, and the day after with it stale.
			compareSigners(t, c, tc.signCase)
			next := tc.signCase
			next.when = next.when.Add(24 * time.Hour)
			compareSigners(t, c, next)
		})
	}
}

// TestSigV4MatchesTheSDKSignerRandomly signs random requests on a few
// clients, as a long-lived client signs: credentials rotating, times
// moving across days, bodies of every size.
func TestSigV4MatchesTheSDKSignerRandomly(t *testing.T) {
	rng := rand.New(rand.NewSource(31))
	endpoints := []string{"https://svc.us-east-1.amazonaws.com/", "http://localhost:8000/", "http://localhost:4566/base/", "https://svc.example.com:443/x/"}
	regions := []string{"us-east-1", "eu-central-1", "ap-northeast-3", "us-gov-west-1", "cn-northwest-1"}
	services := []string{"dynamodb", "sqs"}
	headers := []map[string]string{ddbHeader, sqsHeader, nil}
	credentials := []aws.Credentials{
		{AccessKeyID: "AKIA1", SecretAccessKey: "s1"},
		{AccessKeyID: "ASIA2", SecretAccessKey: "s2", SessionToken: "t2"},
		// The SDK's signer caches the key by access key ID alone: a secret
		// rotated under the same ID is signed with the old key there.
		{AccessKeyID: "ASIA3", SecretAccessKey: "s2-rotated", SessionToken: "t3"},
	}
	var clients []*Client
	var shapes []signCase
	for i := 0; i < 12; i++ {
		sc := signCase{
			endpoint: endpoints[rng.Intn(len(endpoints))],
			service:  services[rng.Intn(len(services))],
			region:   regions[rng.Intn(len(regions))],
			header:   headers[rng.Intn(len(headers))],
		}
		clients = append(clients, signerClient(t, sc.endpoint, sc.service, sc.region, sc.header, false))
		shapes = append(shapes, sc)
	}
	when := time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC)
	for i := 0; i < 3000; i++ {
		k := rng.Intn(len(clients))
		sc := shapes[k]
		sc.creds = credentials[rng.Intn(len(credentials))]
		sc.body = make([]byte, []int{0, 1, 100, 5000, 70000}[rng.Intn(5)])
		rng.Read(sc.body)
		sc.attempt = 1 + rng.Intn(3)
		when = when.Add(time.Duration(rng.Int63n(int64(3 * time.Minute))))
		sc.when = when
		compareSigners(t, clients[k], sc)
		if t.Failed() {
			return
		}
	}
}

func TestSigV4RefusesHeadersItSetsItself(t *testing.T) {
	for _, name := range []string{"Host", "Content-Length", "X-Amz-Target", "Amz-Sdk-Request", "X-Amz-Date", "X-Amz-Security-Token"} {
		h := http.Header{"Content-Type": {"application/x-amz-json-1.0"}}
		h.Set(name, "v")
		if s := newSigV4("https://sqs.us-east-1.amazonaws.com/", h, "sqs", "us-east-1"); s != nil {
			t.Errorf("newSigV4 with a constant %s: want nil (the SDK's signer signs), got a signer", name)
		}
	}
}

func TestSignerEnvChoosesTheSDKSigner(t *testing.T) {
	for _, tc := range []struct {
		value   string
		sdk     bool
		wantErr bool
	}{{"", false, false}, {"own", false, false}, {"sdk", true, false}, {"SDK", false, true}, {"v4", false, true}} {
		t.Setenv(EnvSigner, tc.value)
		got, err := sdkSignerChosen()
		if got != tc.sdk || (err != nil) != tc.wantErr {
			t.Errorf("%s=%q: SDK signer chosen %v, error %v; want %v, error %v", EnvSigner, tc.value, got, err, tc.sdk, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), EnvSigner) {
			t.Errorf("%s=%q: error %q does not name the variable", EnvSigner, tc.value, err)
		}
	}
}

func BenchmarkSign(b *testing.B) {
	creds := aws.Credentials{AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "secret", SessionToken: strings.Repeat("t", 600)}
	body := []byte(`{"TableName":"jobs","Key":{"pk":{"S":"job#1"}},"UpdateExpression":"SET #s = :s"}`)
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	for _, signer := range []string{"own", "sdk"} {
		b.Run(signer, func(b *testing.B) {
			c := signerClient(b, "https://dynamodb.us-east-1.amazonaws.com/", "dynamodb", "us-east-1", ddbHeader, false)
			if signer == "sdk" {
				c.own = nil
			}
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				req, err := c.request(ctx, "UpdateItem", body, 1, 3)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.sign(ctx, req, creds, hash, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSigV4SignsConcurrently signs from several goroutines across a day
// boundary with two pairs of credentials, so the key cache is replaced
// while other signatures read it (run with -race).
func TestSigV4SignsConcurrently(t *testing.T) {
	c := signerClient(t, "https://sqs.us-east-1.amazonaws.com/", "sqs", "us-east-1", sqsHeader, false)
	creds := []aws.Credentials{{AccessKeyID: "AKIA1", SecretAccessKey: "s1"}, {AccessKeyID: "ASIA2", SecretAccessKey: "s2", SessionToken: "t"}}
	midnight := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sdk := v4.NewSigner()
			for i := 0; i < 200; i++ {
				cr := creds[(g+i)%2]
				when := midnight.Add(time.Duration((g+i)%3-1) * time.Second)
				own, _ := c.request(context.Background(), "SendMessageBatch", []byte(`{}`), 1, 3)
				want, _ := c.request(context.Background(), "SendMessageBatch", []byte(`{}`), 1, 3)
				c.own.sign(own, cr, emptyObjectHash, when)
				if err := sdk.SignHTTP(context.Background(), cr, want, emptyObjectHash, "sqs", "us-east-1", when); err != nil {
					errs <- err.Error()
					return
				}
				if got, w := own.Header.Get("Authorization"), want.Header.Get("Authorization"); got != w {
					errs <- fmt.Sprintf("goroutine %d, signature %d: %q, want %q", g, i, got, w)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

var emptyObjectHash = func() string { s := sha256.Sum256([]byte(`{}`)); return hex.EncodeToString(s[:]) }()
