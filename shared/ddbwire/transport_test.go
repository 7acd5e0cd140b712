package ddbwire_test

import (
	"context"
	"encoding/json"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/ddbwire"
)

// wireServer answers transactions over a real connection: the attempts
// listed in lose are processed and their answers lost on the wire (the
// connection closed before or within the answer); the server records the
// token and attempt header of every request it got.
type wireServer struct {
	*httptest.Server
	mu     sync.Mutex
	lose   map[int]string // request number (from 1) -> the bytes sent before closing
	tokens []string
	sdkReq []string
}

func newWireServer(t *testing.T) *wireServer {
	s := &wireServer{lose: map[int]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var v struct{ ClientRequestToken string }
		_ = json.Unmarshal(b, &v)
		s.mu.Lock()
		s.tokens = append(s.tokens, v.ClientRequestToken)
		s.sdkReq = append(s.sdkReq, r.Header.Get("Amz-Sdk-Request"))
		raw, lost := s.lose[len(s.tokens)]
		s.mu.Unlock()
		const body = `{}`
		if lost {
			c, bw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			bw.WriteString(raw)
			bw.Flush()
			c.Close()
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10))
		io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

// An answer lost on the wire (the connection closed before or within it)
// is retried by the lean client over the synchronous transport with the
// transaction's token unchanged; an idle connection the server closed
// between calls costs no retry.
func TestLostAnswersOverTheWire(t *testing.T) {
	// net/http's transport may still hand out the closed idle connection
	// (its read loop has not seen the close yet) and retry.
	t.Setenv(awsconf.EnvTransport, "sync")
	for _, c := range []struct{ name, raw string }{
		{"closed before the answer", ""},
		{"closed within the header", "HTTP/1.1 200 OK\r\nContent-Ty"},
		{"closed within the body", "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: 50\r\n\r\n{\"Consu"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newWireServer(t)
			s.lose[1] = c.raw
			cfg := testConfig(s.URL)
			cfg.Retryer = func() aws.Retryer {
				return retry.NewStandard(func(o *retry.StandardOptions) {
					o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
				})
			}
			lean, err := ddbwire.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			in := &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Delete: &types.Delete{TableName: table, Key: key}}}}
			if _, err := lean.TransactWriteItems(context.Background(), in); err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			tokens := append([]string(nil), s.tokens...)
			s.mu.Unlock()
			if len(tokens) != 2 || tokens[0] == "" || tokens[0] != tokens[1] {
				t.Fatalf("the server got tokens %q, want one token twice (the lost attempt and its retry)", tokens)
			}
			// The connection the server closes now sits idle in the pool.
			s.CloseClientConnections()
			if _, err := lean.TransactWriteItems(context.Background(), in); err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.tokens) != 3 || s.sdkReq[2] != "attempt=1; max=3" {
				t.Fatalf("after an idle connection closed: requests %d, the last one's %q; want 3, its first attempt", len(s.tokens), s.sdkReq[len(s.sdkReq)-1])
			}
		})
	}
}
