package awswire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go/encoding/httpbinding"
)

// EnvSigner names the variable that, set to "sdk", signs the lean
// clients' requests with the SDK's v4.Signer instead of sigv4.
const EnvSigner = "BATCHWORK_SIGNER"

// sigv4 signs the requests the core sends, byte for byte as the SDK's
// v4.Signer.SignHTTP signs them, with what the SDK's signer works out on
// every request worked out once: the canonical URI and query, the
// canonical lines and the sorted names of the constant headers, and the
// signing key (per day; the region and service are the client's). The
// SDK's signer costs a sort, a map and a dozen strings per request.
//
// It knows the request's headers: the constant ones (the client's header,
// given to newSigV4), the ones attempt sets (X-Amz-Target,
// Amz-Sdk-Request; X-Amzn-Trace-Id, unsigned), and the ones signing sets
// (X-Amz-Date, X-Amz-Security-Token, Authorization). A constant header
// named like one of the others is refused (newSigV4 returns nil) and the
// SDK's signer signs, so the two can never disagree on a header set.
type sigv4 struct {
	service, region string
	// head is "POST\n<uri>\n<query>\n"; host is the host's canonical
	// line; setHost, when not empty, is the request's Host as the SDK's
	// signer sets it (the endpoint's default port dropped).
	head, host, setHost string
	query               string      // the URL's query as the SDK's signer leaves it
	consts              []canonLine // sorted by name
	// signed[token][length]: the SignedHeaders value with or without
	// x-amz-security-token and content-length.
	signed [2][2]string
	key    atomic.Pointer[signingKey]
	date   atomic.Pointer[dateValue]
	token  atomic.Pointer[tokenValue]
}

// dateValue is an X-Amz-Date header's value slice, for one second.
type dateValue struct {
	date [16]byte
	v    []string
}

// tokenValue is an X-Amz-Security-Token header's value slice.
type tokenValue struct {
	token string
	v     []string
}

type canonLine struct{ name, line string } // line is "name:value\n"

// signingKey is the key of one day for one pair of credentials, with the
// HMACs keyed with it, pooled.
type signingKey struct {
	accessKey, secret string
	day               [8]byte // YYYYMMDD
	scope             string  // day/region/service/aws4_request
	macs              sync.Pool
}

// The headers the SDK's signer leaves unsigned (v4Internal.IgnoredHeaders).
var unsignedHeaders = map[string]bool{
	"authorization": true, "user-agent": true, "x-amzn-trace-id": true, "expect": true, "transfer-encoding": true,
}

// The headers a request gets besides the constant ones.
var requestHeaders = map[string]bool{
	"host": true, "content-length": true, "x-amz-target": true, "amz-sdk-request": true,
	"x-amz-date": true, "x-amz-security-token": true,
}

// newSigV4 precomputes the signing of POSTs to endpoint carrying header;
// nil when header names one of the headers the request gets otherwise.
func newSigV4(endpoint string, header http.Header, service, region string) *sigv4 {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil
	}
	s := &sigv4{service: service, region: region}
	for k, vs := range header {
		name := strings.ToLower(k)
		if unsignedHeaders[name] {
			continue
		}
		if requestHeaders[name] {
			return nil
		}
		line := name + ":"
		for i, v := range vs {
			if i > 0 {
				line += ","
			}
			line += canonValue(v)
		}
		s.consts = append(s.consts, canonLine{name, line + "\n"})
	}
	sort.Slice(s.consts, func(i, j int) bool { return s.consts[i].name < s.consts[j].name })

	// As v4.Signer's Build: the query's values sorted, encoded with %20
	// for spaces; the escaped path escaped again; the Host header's
	// default port dropped.
	q := u.Query()
	for k := range q {
		sort.Strings(q[k])
	}
	s.query = strings.ReplaceAll(q.Encode(), "+", "%20")
	s.head = "POST\n" + httpbinding.EscapePath(uriPath(u), false) + "\n" + s.query + "\n"
	host := u.Host
	if port := portOnly(host); port != "" && isDefaultPort(u.Scheme, port) {
		host = stripPort(host)
		s.setHost = host
	}
	s.host = "host:" + stripExcessSpaces(host) + "\n"

	for tok := 0; tok < 2; tok++ {
		for length := 0; length < 2; length++ {
			names := []string{"host", "x-amz-target", "amz-sdk-request", "x-amz-date"}
			if tok == 1 {
				names = append(names, "x-amz-security-token")
			}
			if length == 1 {
				names = append(names, "content-length")
			}
			for _, c := range s.consts {
				names = append(names, c.name)
			}
			sort.Strings(names)
			s.signed[tok][length] = strings.Join(names, ";")
		}
	}
	return s
}

// sign sets req's X-Amz-Date, X-Amz-Security-Token (when the credentials
// have a session token), Authorization and, as the SDK's signer does, its
// Host and query. payloadHash is the body's SHA-256, hex.
//
// The request carries X-Amz-Target and Amz-Sdk-Request, as attempt sets
// them, and no header signing sets.
func (s *sigv4) sign(req *http.Request, creds aws.Credentials, payloadHash string, t time.Time) {
	t = t.UTC()
	var date [16]byte // 20060102T150405Z
	formatAmzDate(&date, t)
	key := s.signingKey(creds, date[:8])

	// The date's and the token's value slices are shared by the requests
	// of one second and of one token, as the client's constant headers'
	// are: a header's slice is replaced, never written into.
	h := req.Header
	d := s.date.Load()
	if d == nil || d.date != date {
		d = &dateValue{date: date, v: []string{string(date[:])}}
		s.date.Store(d)
	}
	h["X-Amz-Date"] = d.v
	token := creds.SessionToken
	tok, length := 0, 0
	if token != "" {
		t := s.token.Load()
		if t == nil || t.token != token {
			t = &tokenValue{token: token, v: []string{token}}
			s.token.Store(t)
		}
		h["X-Amz-Security-Token"] = t.v
		tok = 1
	}
	if req.ContentLength > 0 {
		length = 1
	}
	if s.setHost != "" {
		req.Host = s.setHost
	}
	if req.URL.RawQuery != s.query {
		req.URL.RawQuery = s.query
	}

	bp := bufPool.Get().(*[]byte)
	b := append((*bp)[:0], s.head...)
	// The request headers merged, in name order, with the constant ones.
	var lenBuf [20]byte
	dyn := [...]canonLine{
		{"amz-sdk-request", ""}, {"content-length", ""}, {"host", ""},
		{"x-amz-date", ""}, {"x-amz-security-token", ""}, {"x-amz-target", ""},
	}
	ci := 0
	for _, d := range dyn {
		for ci < len(s.consts) && s.consts[ci].name < d.name {
			b = append(b, s.consts[ci].line...)
			ci++
		}
		switch d.name {
		case "amz-sdk-request":
			b = appendHeader(b, d.name, h["Amz-Sdk-Request"])
		case "content-length":
			if length == 1 {
				b = append(b, "content-length:"...)
				b = append(b, strconv.AppendInt(lenBuf[:0], req.ContentLength, 10)...)
				b = append(b, '\n')
			}
		case "host":
			b = append(b, s.host...)
		case "x-amz-date":
			b = append(b, "x-amz-date:"...)
			b = append(b, date[:]...)
			b = append(b, '\n')
		case "x-amz-security-token":
			if tok == 1 {
				b = appendHeader(b, d.name, h["X-Amz-Security-Token"])
			}
		case "x-amz-target":
			b = appendHeader(b, d.name, h["X-Amz-Target"])
		}
	}
	for ; ci < len(s.consts); ci++ {
		b = append(b, s.consts[ci].line...)
	}
	signed := s.signed[tok][length]
	b = append(b, '\n')
	b = append(b, signed...)
	b = append(b, '\n')
	b = append(b, payloadHash...)
	canonSum := sha256.Sum256(b)

	b = append(b[:0], "AWS4-HMAC-SHA256\n"...)
	b = append(b, date[:]...)
	b = append(b, '\n')
	b = append(b, key.scope...)
	b = append(b, '\n')
	b = hex.AppendEncode(b, canonSum[:])
	mac := key.macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write(b)
	var sig [sha256.Size]byte
	mac.Sum(sig[:0])
	key.macs.Put(mac)

	b = append(b[:0], "AWS4-HMAC-SHA256 Credential="...)
	b = append(b, creds.AccessKeyID...)
	b = append(b, '/')
	b = append(b, key.scope...)
	b = append(b, ", SignedHeaders="...)
	b = append(b, signed...)
	b = append(b, ", Signature="...)
	b = hex.AppendEncode(b, sig[:])
	h["Authorization"] = []string{string(b)}
	*bp = b
	bufPool.Put(bp)
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// signingKey is the key of creds for day, derived once a day: the SDK's
// signer caches it per region and service as well.
func (s *sigv4) signingKey(creds aws.Credentials, day []byte) *signingKey {
	if k := s.key.Load(); k != nil && string(k.day[:]) == string(day) && k.accessKey == creds.AccessKeyID && k.secret == creds.SecretAccessKey {
		return k
	}
	k := &signingKey{accessKey: creds.AccessKeyID, secret: creds.SecretAccessKey}
	copy(k.day[:], day)
	k.scope = string(day) + "/" + s.region + "/" + s.service + "/aws4_request"
	key := hmacSum([]byte("AWS4"+creds.SecretAccessKey), day)
	key = hmacSum(key, []byte(s.region))
	key = hmacSum(key, []byte(s.service))
	key = hmacSum(key, []byte("aws4_request"))
	k.macs.New = func() any { return hmac.New(sha256.New, key) }
	s.key.Store(k)
	return k
}

func hmacSum(key, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return m.Sum(nil)
}

func formatAmzDate(d *[16]byte, t time.Time) {
	year, month, day := t.Date()
	hour, min, sec := t.Clock()
	put := func(i, v, n int) {
		for j := i + n - 1; j >= i; j-- {
			d[j] = byte('0' + v%10)
			v /= 10
		}
	}
	put(0, year, 4)
	put(4, int(month), 2)
	put(6, day, 2)
	d[8] = 'T'
	put(9, hour, 2)
	put(11, min, 2)
	put(13, sec, 2)
	d[15] = 'Z'
}

func appendHeader(b []byte, name string, vs []string) []byte {
	b = append(b, name...)
	b = append(b, ':')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, canonValue(v)...)
	}
	return append(b, '\n')
}

// canonValue is a header value as the SDK's signer writes it: trimmed,
// runs of spaces made one. Values without spaces or other white space
// (all that the core sends) come back as they are.
func canonValue(v string) string {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c >= 0x80 {
			return strings.TrimSpace(stripExcessSpaces(v))
		}
	}
	return v
}

// stripExcessSpaces is the SDK's v4Internal.StripExcessSpaces.
func stripExcessSpaces(str string) string {
	var j, k, l, m, spaces int
	for j = len(str) - 1; j >= 0 && str[j] == ' '; j-- {
	}
	for k = 0; k < j && str[k] == ' '; k++ {
	}
	str = str[k : j+1]
	j = strings.Index(str, "  ")
	if j < 0 {
		return str
	}
	buf := []byte(str)
	for k, m, l = j, j, len(buf); k < l; k++ {
		if buf[k] == ' ' {
			if spaces == 0 {
				buf[m] = buf[k]
				m++
			}
			spaces++
		} else {
			spaces = 0
			buf[m] = buf[k]
			m++
		}
	}
	return string(buf[:m])
}

// uriPath is the SDK's v4Internal.GetURIPath.
func uriPath(u *url.URL) string {
	var p string
	if len(u.Opaque) > 0 {
		opaque := u.Opaque
		if i := strings.Index(opaque, "?"); i >= 0 {
			opaque = opaque[:i]
		}
		if strings.HasPrefix(opaque, "//") {
			opaque = opaque[2:]
		}
		if i := strings.Index(opaque, "/"); i >= 0 {
			p = opaque[i:]
		}
	} else {
		p = u.EscapedPath()
	}
	if p == "" {
		p = "/"
	}
	return p
}

func stripPort(hostport string) string {
	colon := strings.IndexByte(hostport, ':')
	if colon == -1 {
		return hostport
	}
	if i := strings.IndexByte(hostport, ']'); i != -1 {
		return strings.TrimPrefix(hostport[:i], "[")
	}
	return hostport[:colon]
}

func portOnly(hostport string) string {
	colon := strings.IndexByte(hostport, ':')
	if colon == -1 {
		return ""
	}
	if i := strings.Index(hostport, "]:"); i != -1 {
		return hostport[i+len("]:"):]
	}
	if strings.Contains(hostport, "]") {
		return ""
	}
	return hostport[colon+len(":"):]
}

func isDefaultPort(scheme, port string) bool {
	s := strings.ToLower(scheme)
	return s == "http" && port == "80" || s == "https" && port == "443"
}

// sdkSignerChosen reads EnvSigner: "sdk" for the SDK's signer, "own" or
// unset for sigv4.
func sdkSignerChosen() (bool, error) {
	switch v := os.Getenv(EnvSigner); v {
	case "", "own":
		return false, nil
	case "sdk":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: want own or sdk", EnvSigner, v)
	}
}
